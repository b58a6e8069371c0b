#!/usr/bin/env python3
"""Writes the GPT-2 tokenizer test vectors (tests/data/tokenizer_vectors/) with tiktoken.

The encoding is built offline from the repo's own copies of OpenAI's files (no network), with
tiktoken's gpt2 pattern. Outputs, all read by tests/data/test_tokenizer.cpp:
  fineweb_edu.ids.gz        per document of assets/fineweb-edu/fineweb_edu.jsonl: uint32 n, n x int32 ids
                            (little-endian)
  nasty.jsonl.gz            hand-written and random hard strings: {"name", "text", "ids"} a line
  fineweb_legal.digests.gz  per document of assets/fineweb/fineweb_legal_subset.jsonl.xz: "<n> <sha256>",
  commoncrawl.digests.gz    the sha256 of its ids as little-endian int32 (the same for --commoncrawl:
                            allenai/dolma's CC-MAIN-20190717121559-20190717143559-00140.jsonl test
                            fixture, which the repository does not ship)
  unicode_sweep.json.gz     every code point assigned in this Python's Unicode (below U+F0000),
                            placed in a template, in segments of 1024: count + sha256 per segment
  manifest.json             tiktoken version, pattern, source files with sha256 and counts

Usage: scripts/make_tokenizer_vectors.py --commoncrawl FILE [--out DIR]
"""
import argparse
import gzip
import hashlib
import json
import lzma
import os
import random
import struct
import sys
import unicodedata

import tiktoken
import tiktoken.load

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# tiktoken's r50k/gpt2 pattern (tiktoken_ext/openai_public.py), checked below when importable.
GPT2_PAT = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
SWEEP_TEMPLATE = "\0a\0" "1\0 \0!\0\t\0's\0\0\n"  # \0 stands for the code point under test
SWEEP_SEGMENT = 1024
SWEEP_END = 0xF0000  # planes 15-16 are private use only


def gpt2_encoding():
    try:
        from tiktoken_ext.openai_public import r50k_pat_str
        assert r50k_pat_str == GPT2_PAT, f"tiktoken's gpt2 pattern changed: {r50k_pat_str!r}"
    except ImportError:
        pass
    d = os.path.join(REPO, "assets", "gpt2")
    ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(
        vocab_bpe_file=os.path.join(d, "vocab.bpe"),
        encoder_json_file=os.path.join(d, "encoder.json"))
    return tiktoken.Encoding(name="gpt2", pat_str=GPT2_PAT, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": 50256})


def read_texts(path):
    opener = lzma.open if path.endswith(".xz") else open
    with opener(path, "rb") as f:  # lines end at "\n" only, as the C++ reader sees them
        return [json.loads(line)["text"] for line in f.read().split(b"\n") if line.strip()]


def sha256_file(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def ids_digest(ids):
    return hashlib.sha256(struct.pack(f"<{len(ids)}i", *ids)).hexdigest()


def nasty_strings():
    """(name, text) pairs: whitespace, contractions, numbers, scripts, emoji, specials, long runs."""
    s = [
        ("empty", ""), ("space", " "), ("two_spaces", "  "), ("newline", "\n"),
        ("newlines", "\n\n"), ("crlf", "\r\n"), ("crlf_between", "a\r\nb\r\n\r\nc"),
        ("tab", "\t"), ("tabs_word", "\t\t\tx"), ("lead_spaces", "   x"), ("trail_spaces", "x   "),
        ("inner_spaces", "x   y"), ("space_nl_space", "x \n y"), ("space_nl", " \n"),
        ("nl_space_nl", "\n \n"), ("two_spaces_word", "a  b"), ("spaces_10000", " " * 10000),
        ("newlines_1000", "\n" * 1000), ("ws_mix", " \t\n\r\x0b\x0c x \t\n\r\x0b\x0c"),
        ("ideographic_space", "a\u3000b\u3000\u3000c\u3000"), ("nbsp", "a\u00a0b \u00a0c\u00a0\u00a0"),
        ("nel", "a\u0085b\u0085\u0085 c"), ("line_sep", "a\u2028b\u2029c"),
        ("zwsp_not_space", "a\u200bb \u200b c"), ("bom", "\ufeffhello \ufeff"),
        ("fs_gs_rs_us", "a\x1cb\x1d c\x1e\x1f d"), ("mongolian_vs", "a\u180eb \u180e"),
        ("en_em_spaces", "a\u2002b\u2003\u2003c\u2009d\u200ae\u202ff\u205fg"),
        ("ogham_space", "a\u1680b"), ("space_before_nbsp", " \u00a0x"), ("nbsp_before_word", "\u00a0x"),
        ("tab_space_word", " \tword"), ("space_tab_word", "\t word"), ("nl_space_word", "\n word"),
        ("ideo_space_word", "  \u3000word"), ("ideo_then_space_word", "\u3000 word"),
        ("trail_space_nl", "word \n"), ("trail_nl_space", "word\n "), ("trail_two", "word  "),
        ("contractions", "don't DON'T I'm we'll they've you're he'd it's"),
        ("contraction_edges", "'s' ''s 'ss 'll' 'LL 'Re 'rE ' 's 'd'd'd 't'"),
        ("apostrophe_runs", "''''s !!'s ?'ll"), ("oneil", "O'Neil's rock'n'roll"),
        ("curly", "don\u2019t it\u2019s \u2018quoted\u2019 \u201cdouble\u201d"),
        ("apostrophe_only", "'"), ("apostrophes", "''"), ("apostrophe_space_s", "'  's"),
        ("digits", "123456789 3.14159 1,000,000 x1y2 007"), ("arabic_digits", "\u0663\u0664\u0665 \u06f1\u06f2"),
        ("circled", "\u2460\u2461 \u2474"), ("roman", "\u216b \u2167x"), ("fractions", "\u00bd \u00be1"),
        ("superscripts", "x\u00b2 10\u00b3 H\u2082O"), ("year", " 2023 1999"),
        ("digits_1000", "1" * 1000), ("digit_letter_mix", "abc123def456 7g8h9"),
        ("emoji", "\U0001f44d \U0001f600\U0001f603\U0001f604"),
        ("family", "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466"),
        ("flag", "\U0001f1fa\U0001f1f8 \U0001f1ef\U0001f1f5"), ("heart_vs16", "\u2764\ufe0f \u2764"),
        ("skin_tone", "\U0001f44b\U0001f3fd hi"), ("emoji_500", "\U0001f600" * 500),
        ("japanese", "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3067\u3059\u3002"),
        ("chinese", "\u4e2d\u6587\u6587\u672c\uff0c\u6d4b\u8bd5\u3002"), ("korean", "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8"),
        ("combining", "e\u0301 n\u0303 a\u0308\u0304"), ("precomposed", "\u00e9 \u00f1 caf\u00e9"),
        ("zalgo", "Z\u0324\u0354\u0367\u0311\u0313a\u0308\u0356\u032d\u0308\u0307l\u036e\u0312\u036bg\u030c\u0317\u035a\u031ao\u0319\u0314\u036e\u0307\u0350\u0307"),
        ("devanagari", "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e"),
        ("thai", "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35 \u0e04\u0e23\u0e31\u0e1a"),
        ("arabic", "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645"),
        ("hebrew_niqqud", "\u05e9\u05b8\u05c1\u05dc\u05d5\u05b9\u05dd"),
        ("greek_cyrillic", "\u0391\u03b8\u03ae\u03bd\u03b1 \u041c\u043e\u0441\u043a\u0432\u0430"),
        ("endoftext", "<|endoftext|>"), ("endoftext_inside", "Hello<|endoftext|>world"),
        ("endoftext_twice", "<|endoftext|><|endoftext|> <|endoftext|>"), ("startoftext", "<|startoftext|>"),
        ("code", "def f(x):\n    return x**2\n\n\tif (a && b) { c++; }\n"),
        ("json", '{"a": [1, 2, {"b": null}], "c": "d\\n"}'),
        ("url", "http://example.com/a?b=c&d=e#f https://x.org/~u/"), ("html", "<html><body class=\"x\">"),
        ("windows_path", "C:\\path\\to\\file.txt"), ("rules", "----- ===== ...... !!!??? ***"),
        ("controls", "".join(chr(i) for i in range(32)) + "\x7f"), ("nul", "\x00a\x00 \x00"),
        ("latin1", "".join(chr(i) for i in range(256))),
        ("long_a", "a" * 5000), ("long_ab", "ab" * 3000), ("long_dots", "." * 2000),
        ("long_word", "supercalifragilisticexpialidocious" * 200),
        ("long_mixed_punct", "!@#$%^&*()_+-=[]{}|;:,.<>/?~`" * 100),
        ("long_cjk", "\u4e2d\u6587" * 1000),
    ]
    # Each White_Space character and its near misses, before punctuation, a letter, the end.
    for cp in [0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x1C, 0x1D, 0x1E, 0x1F, 0x20, 0x85, 0xA0, 0x1680,
               0x180E, 0x2000, 0x2007, 0x200A, 0x200B, 0x2028, 0x2029, 0x202F, 0x205F, 0x2060,
               0x3000, 0xFEFF]:
        c = chr(cp)
        s.append((f"space_probe_{cp:04x}", f"x{c}!{c}{c}y {c}a{c} {c}1{c}{c}"))
    rng = random.Random(20240520)
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    pools = [letters, "0123456789", " \t\n\r", "'\u2019", "sdmtlvre", ".,;:!?-()[]\"<>|",
             "\u00a0\u3000\u2003\u0085\u2028", "\u00e9\u00fc\u00df\u0142\u00f8", "\u0301\u0308\u0327",
             "\u4e2d\u6587\u65e5\u672c\u3042\u30a2\ud55c", "\U0001f600\U0001f44d\u2764\ufe0f\u200d",
             "\u0663\u2460\u00bd\u216b\u00b2", "\x00\x1c\x7f\u200b\ufeff"]
    for i in range(400):
        n = rng.randint(1, 80)
        text = "".join(rng.choice(rng.choice(pools)) for _ in range(n))
        s.append((f"random_{i}", text))
    rng_letters = random.Random(7)
    s.append(("long_random_letters", "".join(rng_letters.choice(letters) for _ in range(20000))))
    s.append(("long_random_bytes_latin", "".join(chr(rng_letters.randrange(0x20, 0x250)) for _ in range(5000))))
    return s


def sweep_code_points():
    """Code points this Python's unicodedata knows (not Cn) and not surrogates, below SWEEP_END.
    Both tiktoken's (newer) Unicode tables and ICU's agree on these."""
    return [cp for cp in range(SWEEP_END)
            if unicodedata.category(chr(cp)) not in ("Cn", "Cs")]


def to_ranges(cps):
    ranges = []
    for cp in cps:
        if ranges and ranges[-1][1] + 1 == cp:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    return ranges


def sweep_text(cps):
    return "".join(SWEEP_TEMPLATE.replace("\0", chr(cp)) for cp in cps)


def write_gz(path, data: bytes):
    # mtime=0 keeps the output byte-identical between runs.
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0) as f:
        f.write(data)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commoncrawl", required=True, help="the dolma Common Crawl test fixture (.jsonl)")
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "data", "tokenizer_vectors"))
    args = ap.parse_args()
    enc = gpt2_encoding()
    sources = {
        "fineweb_edu": os.path.join(REPO, "assets", "fineweb-edu", "fineweb_edu.jsonl"),
        "fineweb_legal": os.path.join(REPO, "assets", "fineweb", "fineweb_legal_subset.jsonl.xz"),
        "commoncrawl": args.commoncrawl,
    }
    os.makedirs(args.out, exist_ok=True)
    manifest = {"tiktoken": tiktoken.__version__, "pattern": GPT2_PAT,
                "python_unicode": unicodedata.unidata_version, "sources": {}}

    for name, path in sources.items():
        texts = read_texts(path)
        all_ids = enc.encode_ordinary_batch(texts, num_threads=4)
        n_tokens = sum(len(x) for x in all_ids)
        manifest["sources"][name] = {"path": os.path.basename(path), "sha256": sha256_file(path),
                                     "documents": len(texts), "tokens": n_tokens,
                                     "bytes": sum(len(t.encode()) for t in texts)}
        if name == "fineweb_edu":
            blob = b"".join(struct.pack(f"<I{len(x)}i", len(x), *x) for x in all_ids)
            write_gz(os.path.join(args.out, "fineweb_edu.ids.gz"), blob)
        else:
            lines = "".join(f"{len(x)} {ids_digest(x)}\n" for x in all_ids)
            write_gz(os.path.join(args.out, f"{name}.digests.gz"), lines.encode())
        print(f"{name}: {len(texts)} documents, {n_tokens} tokens", file=sys.stderr)

    nasty = nasty_strings()
    lines = "".join(json.dumps({"name": n, "text": t, "ids": enc.encode_ordinary(t)}) + "\n"
                    for n, t in nasty)
    write_gz(os.path.join(args.out, "nasty.jsonl.gz"), lines.encode())
    print(f"nasty: {len(nasty)} strings", file=sys.stderr)

    cps = sweep_code_points()
    segments = []
    for i in range(0, len(cps), SWEEP_SEGMENT):
        seg = cps[i:i + SWEEP_SEGMENT]
        ids = enc.encode_ordinary(sweep_text(seg))
        segments.append({"first": seg[0], "last": seg[-1], "code_points": len(seg),
                         "tokens": len(ids), "sha256": ids_digest(ids)})
    sweep = {"template": SWEEP_TEMPLATE, "segment": SWEEP_SEGMENT, "ranges": to_ranges(cps),
             "segments": segments}
    write_gz(os.path.join(args.out, "unicode_sweep.json.gz"), json.dumps(sweep).encode())
    manifest["unicode_sweep"] = {"code_points": len(cps), "segments": len(segments)}
    print(f"unicode sweep: {len(cps)} code points, {len(segments)} segments", file=sys.stderr)

    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
