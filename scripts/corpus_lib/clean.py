"""Cleaning of documentation pages: lines repeated across a package's pages (navigation, boilerplate),
pages too short or not English, and exact or near-duplicate pages (MinHash over word 5-shingles)."""
import hashlib
import re
from collections import Counter

import numpy as np

_LETTER = re.compile(r"[^\W\d_]")
_WORD = re.compile(r"[^\W_]+")
_NORM_SPACE = re.compile(r"\s+")
_DIGITS = re.compile(r"\d+")
_STOPWORDS = frozenset(
    "the of and to a in is it that for on as with be by this are or an from at not if can you which".split())


def _line_key(line):
    """Lines that differ only in case, spacing or numbers share a key (blake2b, 8 bytes)."""
    norm = _DIGITS.sub("0", _NORM_SPACE.sub(" ", line.strip().lower()))
    return hashlib.blake2b(norm.encode("utf-8", "surrogatepass"), digest_size=8).digest()


def drop_repeated_lines(texts, min_pages):
    """Removes, from every page, each line with a letter that appears in at least min_pages distinct
    pages of this list. Returns (new texts, lines removed, characters removed)."""
    seen_in = Counter()
    for text in texts:
        seen_in.update({_line_key(l) for l in text.split("\n") if _LETTER.search(l)})
    repeated = {k for k, n in seen_in.items() if n >= min_pages}
    out, lines_removed, chars_removed = [], 0, 0
    for text in texts:
        kept = []
        for line in text.split("\n"):
            if _LETTER.search(line) and _line_key(line) in repeated:
                lines_removed += 1
                chars_removed += len(line) + 1
            else:
                kept.append(line)
        out.append(re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip("\n"))
    return out, lines_removed, chars_removed


def page_problem(text, min_words, min_stopword_ratio, min_ascii_letter_ratio):
    """Why a page is left out ("too_short", "not_english"), or None to keep it."""
    words = _WORD.findall(text)
    if len(words) < min_words:
        return "too_short"
    letters = _LETTER.findall(text)
    ascii_letters = sum(1 for c in letters if c < "\x80")
    if ascii_letters < min_ascii_letter_ratio * len(letters):
        return "not_english"
    stop = sum(1 for w in words if w.lower() in _STOPWORDS)
    if stop < min_stopword_ratio * len(words):
        return "not_english"
    return None


def normalised_hash(text):
    """Exact-duplicate key: the words, lower-cased, in order."""
    return hashlib.sha256(" ".join(_WORD.findall(text.lower())).encode("utf-8", "surrogatepass")).digest()


class MinHashDedup:
    """Near-duplicate detection. A page's signature is, for each of `perms` seeded hash functions, the
    minimum over its word 5-shingles; pages sharing all rows of any of `bands` bands are compared and
    the later one is a duplicate when at least `threshold` of the signature agrees (estimated Jaccard)."""

    SHINGLE = 5

    def __init__(self, seed, perms=64, bands=16, threshold=0.8):
        assert perms % bands == 0
        rng = np.random.default_rng(seed)
        self.a = rng.integers(1, 2**63, size=perms, dtype=np.uint64) | np.uint64(1)
        self.b = rng.integers(0, 2**63, size=perms, dtype=np.uint64)
        self.mix = rng.integers(1, 2**63, size=self.SHINGLE, dtype=np.uint64) | np.uint64(1)
        self.bands, self.rows, self.threshold = bands, perms // bands, threshold
        self.word_ids = {}
        self.buckets = {}
        self.signatures = []

    def _word_hash(self, word):
        h = self.word_ids.get(word)
        if h is None:
            h = int.from_bytes(hashlib.blake2b(word.encode("utf-8", "surrogatepass"), digest_size=8).digest(),
                               "little")
            self.word_ids[word] = h
        return h

    def signature(self, text):
        words = np.array([self._word_hash(w) for w in _WORD.findall(text.lower())], dtype=np.uint64)
        n = len(words) - self.SHINGLE + 1
        if n <= 0:
            words = np.concatenate([words, np.zeros(self.SHINGLE, dtype=np.uint64)])
            n = 1
        shingles = np.zeros(n, dtype=np.uint64)
        for i in range(self.SHINGLE):
            shingles = shingles * np.uint64(31) + words[i:i + n] * self.mix[i]
        shingles = np.unique(shingles)
        x = shingles[None, :] * self.a[:, None] + self.b[:, None]
        x ^= x >> np.uint64(29)
        return x.min(axis=1)

    def is_duplicate(self, text):
        """True when the text nearly duplicates an earlier kept one; otherwise remembers it."""
        sig = self.signature(text)
        keys = [(band, sig[band * self.rows:(band + 1) * self.rows].tobytes()) for band in range(self.bands)]
        checked = set()
        for key in keys:
            for other in self.buckets.get(key, ()):
                if other in checked:
                    continue
                checked.add(other)
                if np.mean(self.signatures[other] == sig) >= self.threshold:
                    return True
        index = len(self.signatures)
        self.signatures.append(sig)
        for key in keys:
            self.buckets.setdefault(key, []).append(index)
        return False
