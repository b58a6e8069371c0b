#!/usr/bin/env python3
"""Builds the offline English training corpus for the GDN-vs-softmax comparison (docs/corpus.md).

Sources: FineWeb-Edu (assets/fineweb-edu, all of it held out for validation), a legal-leaning FineWeb subset
(assets/fineweb, a held-out slice for validation, the rest for training) and Debian documentation packages
(HTML/man/POD stripped to text, boilerplate lines and duplicate pages removed; a held-out slice of whole
pages for validation, the rest for training). Writes train.jsonl, val_fineweb_edu.jsonl, val_fineweb.jsonl,
val_docs.jsonl, MANIFEST.json and corpus_text.tar.xz (all of them) into --out. Same inputs, same bytes.

  python3 scripts/build_corpus.py --out data_out/corpus [--cache DIR] [--packages a,b,...]
                                  [--min-train-tokens N] [--max-train-tokens N]
"""
import argparse
import json
import lzma
import multiprocessing
import os
import platform
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from corpus_lib import CorpusError  # noqa: E402
from corpus_lib.clean import MinHashDedup, drop_repeated_lines, normalised_hash, page_problem  # noqa: E402
from corpus_lib.debs import describe_deb, fetch_deb, sha256_file, unpack_deb  # noqa: E402
from corpus_lib.output import AtomicOutputs, write_bundle, write_json, write_jsonl  # noqa: E402
from corpus_lib.pages import list_pages, page_text_job  # noqa: E402
from corpus_lib.split import cap_tokens, hold_out, hold_out_round_robin, shuffled  # noqa: E402
from corpus_lib.tokens import count_tokens, gpt2_encoding  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_PACKAGES = [
    "debian-handbook", "git-doc", "linux-doc-6.1", "perl-doc", "postgresql-doc-15", "python3.11-doc",
    "rust-doc", "openjdk-17-doc", "python-django-doc", "python-sqlalchemy-doc", "erlang-doc", "llvm-14-doc",
    "clang-14-doc", "cmake-doc", "nodejs-doc", "debian-reference-en", "debian-policy", "developers-reference",
    "python-pandas-doc", "sphinx-doc", "libboost1.74-doc", "manpages", "manpages-dev", "octave-doc",
    "glibc-doc", "bash-doc", "r-doc-html",
]
SEED = 20260101           # held-out choice, training order, and MinHash functions
REPEATED_LINE_PAGES = 10  # a line in this many pages of one package is boilerplate
MIN_WORDS = 50
MIN_STOPWORD_RATIO = 0.04
MIN_ASCII_LETTER_RATIO = 0.9
MINHASH = {"perms": 64, "bands": 16, "shingle_words": 5, "threshold": 0.8}
VAL_FINEWEB_TOKENS = 400_000
VAL_DOCS_TOKENS = 400_000
VAL_DOCS_PACKAGES = 8


class Progress:
    """Progress lines with an ETA on stderr, at most one every few seconds per stage."""

    def __init__(self, stage, total):
        self.stage, self.total, self.start, self.last = stage, total, time.time(), 0.0

    def update(self, done, force=False):
        now = time.time()
        if not force and now - self.last < 5:
            return
        self.last = now
        elapsed = now - self.start
        eta = elapsed / done * (self.total - done) if done else 0
        print(f"[{self.stage}] {done}/{self.total} ({100 * done / max(self.total, 1):.0f}%), "
              f"{elapsed:.0f} s, ETA {eta:.0f} s", file=sys.stderr, flush=True)


def log(msg):
    print(f"build_corpus: {msg}", file=sys.stderr, flush=True)


def read_jsonl(path, opener=open):
    if not os.path.exists(path):
        raise CorpusError(f"{path} does not exist; run from a complete Deltatron checkout")
    records = []
    with opener(path, "rt", encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise CorpusError(f"{path}:{n}: not JSON ({e}); restore the file from git")
            if not isinstance(rec.get("text"), str):
                raise CorpusError(f"{path}:{n}: no string field 'text'; restore the file from git")
            records.append((n, rec))
    return records


def fineweb_sources():
    edu_path = os.path.join(REPO, "assets", "fineweb-edu", "fineweb_edu.jsonl")
    fw_path = os.path.join(REPO, "assets", "fineweb", "fineweb_legal_subset.jsonl.xz")
    edu = [{"text": r["text"], "source": "fineweb_edu", "id": r.get("id") or f"fineweb_edu:line{n:04d}"}
           for n, r in read_jsonl(edu_path)]
    fw = [{"text": r["text"], "source": "fineweb", "id": r["id"]} for _, r in read_jsonl(fw_path, lzma.open)]
    inputs = {"fineweb_edu": {"path": os.path.relpath(edu_path, REPO), "sha256": sha256_file(edu_path)},
              "fineweb": {"path": os.path.relpath(fw_path, REPO), "sha256": sha256_file(fw_path)}}
    return edu, fw, inputs


def package_pages(package, cache, jobs):
    """Fetches, unpacks and converts one package. Returns (deb info, page stats, [(rel, text)])."""
    deb = fetch_deb(package, os.path.join(cache, "debs"))
    info = describe_deb(deb)
    root = unpack_deb(deb, info["deb_sha256"], os.path.join(cache, "unpacked"))
    pages = list_pages(root)
    kinds = sorted({k for k, _ in pages})
    progress = Progress(f"{package}: pages to text", len(pages))
    texts = []
    with multiprocessing.Pool(jobs) as pool:
        for i, item in enumerate(pool.imap(page_text_job, [(root, k, rel) for k, rel in pages], chunksize=8), 1):
            texts.append(item)
            progress.update(i)
    progress.update(len(pages), force=True)
    return info, {"page_files": len(pages), "formats": kinds}, texts


def clean_package(package, texts, stats):
    raw_chars = sum(len(t) for _, t in texts)
    kept_texts, lines_removed, chars_removed = drop_repeated_lines([t for _, t in texts], REPEATED_LINE_PAGES)
    stats.update({"chars_after_stripping": raw_chars, "repeated_lines_removed": lines_removed,
                  "repeated_line_chars_removed": chars_removed, "too_short": 0, "not_english": 0})
    docs = []
    for (rel, _), text in zip(texts, kept_texts):
        problem = page_problem(text, MIN_WORDS, MIN_STOPWORD_RATIO, MIN_ASCII_LETTER_RATIO)
        if problem:
            stats[problem] += 1
            continue
        docs.append({"text": text, "source": f"debian:{package}", "package": package, "id": f"{package}:{rel}"})
    return docs


def dedup_pages(docs, stats_by_package):
    """Drops exact (normalised) and near-duplicate pages; the first in package/path order is kept."""
    exact, near = set(), MinHashDedup(SEED, MINHASH["perms"], MINHASH["bands"], MINHASH["threshold"])
    kept = []
    progress = Progress("dedup", len(docs))
    for i, d in enumerate(docs, 1):
        stats = stats_by_package[d["package"]]
        key = normalised_hash(d["text"])
        if key in exact:
            stats["exact_duplicates"] = stats.get("exact_duplicates", 0) + 1
        elif near.is_duplicate(d["text"]):
            stats["near_duplicates"] = stats.get("near_duplicates", 0) + 1
        else:
            exact.add(key)
            kept.append(d)
        progress.update(i)
    progress.update(len(docs), force=True)
    return kept


def summary(docs):
    out = {}
    for d in docs:
        s = out.setdefault(d["source"], {"documents": 0, "chars": 0, "tokens": 0})
        s["documents"] += 1
        s["chars"] += len(d["text"])
        s["tokens"] += d["tokens"]
    total = {k: sum(s[k] for s in out.values()) for k in ("documents", "chars", "tokens")}
    return {"total": total, "by_source": dict(sorted(out.items()))}


def tool_versions():
    def first_line(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True).stdout.splitlines()[0]
        except (OSError, IndexError):
            return None
    import numpy
    import tiktoken
    return {"python": platform.python_version(), "tiktoken": tiktoken.__version__, "numpy": numpy.__version__,
            "xz": first_line(["xz", "--version"]), "groff": first_line(["groff", "--version"]),
            "perl (pod2text)": first_line(["perl", "-e", "print $^V"])}


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="output directory (created if missing)")
    p.add_argument("--cache", default=os.path.join(REPO, "data_out", "cache"),
                   help="where .deb files are downloaded and unpacked (default: data_out/cache)")
    p.add_argument("--packages", default=",".join(DEFAULT_PACKAGES), help="comma-separated Debian doc packages")
    p.add_argument("--min-train-tokens", type=int, default=50_000_000,
                   help="fail when train.jsonl would hold fewer GPT-2 tokens (default 50,000,000)")
    p.add_argument("--max-train-tokens", type=int, default=0,
                   help="drop documentation pages (seeded order) beyond this many train tokens (0: keep all)")
    p.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="page conversion processes")
    p.add_argument("--xz-threads", type=int, default=2, help="xz threads for the bundle (same value, same bytes)")
    return p.parse_args(argv)


def build(args):
    t0 = time.time()
    packages = sorted({p.strip() for p in args.packages.split(",") if p.strip()})
    if not packages:
        raise CorpusError("--packages is empty; name at least one Debian documentation package")
    out = AtomicOutputs(os.path.abspath(args.out))
    encoding = gpt2_encoding(os.path.join(REPO, "assets", "gpt2"))

    edu, fw, inputs = fineweb_sources()
    log(f"FineWeb-Edu {len(edu)} documents, FineWeb {len(fw)} documents")

    debs, stats, docs = [], {}, []
    for n, package in enumerate(packages, 1):
        log(f"package {n}/{len(packages)}: {package}")
        info, stats[package], texts = package_pages(package, os.path.abspath(args.cache), args.jobs)
        debs.append(info)
        docs.extend(clean_package(package, texts, stats[package]))
    before = len(docs)
    docs = dedup_pages(docs, stats)
    log(f"documentation pages: {before} after cleaning, {len(docs)} after dedup")

    progress = Progress("token counts", 3)
    for i, group in enumerate((edu, fw, docs), 1):
        for d, n in zip(group, count_tokens(encoding, [d["text"] for d in group], threads=args.jobs)):
            d["tokens"] = n
        progress.update(i, force=True)
    for d in docs:
        s = stats[d["package"]]
        s["kept_pages"] = s.get("kept_pages", 0) + 1
        s["kept_chars"] = s.get("kept_chars", 0) + len(d["text"])
        s["kept_tokens"] = s.get("kept_tokens", 0) + d["tokens"]

    val_fw, train_fw = hold_out(fw, VAL_FINEWEB_TOKENS, SEED)
    val_docs, train_docs = hold_out_round_robin(docs, VAL_DOCS_TOKENS, SEED, "package", VAL_DOCS_PACKAGES)
    train_docs, capped = cap_tokens(train_docs, max(0, args.max_train_tokens - sum(d["tokens"] for d in train_fw))
                                    if args.max_train_tokens else 0, SEED)
    train = shuffled(train_fw + train_docs, SEED)
    train_tokens = sum(d["tokens"] for d in train)
    if train_tokens < args.min_train_tokens:
        raise CorpusError(f"train.jsonl would hold {train_tokens:,} GPT-2 tokens, fewer than --min-train-tokens "
                          f"{args.min_train_tokens:,}; add documentation packages with --packages "
                          f"(English ones: 'apt-cache search -- -doc'), or lower --min-train-tokens")

    splits = {"train.jsonl": train, "val_fineweb_edu.jsonl": shuffled(edu, SEED),
              "val_fineweb.jsonl": shuffled(val_fw, SEED), "val_docs.jsonl": shuffled(val_docs, SEED)}
    files = {}
    try:
        for name, split_docs in splits.items():
            size, sha = write_jsonl(out.temp_path(name), split_docs)
            files[name] = {"bytes": size, "sha256": sha, **summary(split_docs)}
            log(f"{name}: {files[name]['total']['documents']:,} documents, {files[name]['total']['tokens']:,} tokens")
        manifest = {
            "description": "Offline English corpus for the GDN-vs-softmax comparison; see docs/corpus.md",
            "record_format": '{"text", "source", "id"} per line, UTF-8',
            "token_count_method": "exact: tiktoken GPT-2 BPE from assets/gpt2 on every document's text "
                                  "(no <|endoftext|>; deltatron prepare adds one per document)",
            "seed": SEED,
            "splits": {
                "val_fineweb_edu.jsonl": "all of assets/fineweb-edu (too small to split: it is only a held-out set)",
                "val_fineweb.jsonl": f"FineWeb documents in SHA-256(seed, id) order until >= {VAL_FINEWEB_TOKENS:,} "
                                     f"tokens; the rest go to train",
                "val_docs.jsonl": f"whole documentation pages, one at a time from each of the {VAL_DOCS_PACKAGES} "
                                  f"packages with most pages, each in SHA-256(seed, id) order, until >= "
                                  f"{VAL_DOCS_TOKENS:,} tokens; the rest go to train",
                "train.jsonl": "FineWeb and documentation training documents in SHA-256(seed, source, id) order"
                               + (f"; documentation pages capped at --max-train-tokens {args.max_train_tokens:,} "
                                  f"({len(capped)} pages, {sum(d['tokens'] for d in capped):,} tokens left out)"
                                  if args.max_train_tokens else ""),
            },
            "cleaning": {
                "html": "html.parser: script/style/head/nav/header/footer and navigation classes skipped; "
                        "block elements are paragraph breaks; <pre> lines kept",
                "man": "groff -mandoc -t -Tutf8 -P-cbou -rLL=120n, running header and footer dropped",
                "pod": "pod2text -w 100",
                "selection": "HTML pages when a package has any, else POD, English man pages and plain text; "
                             "index, search, source-view and translated pages skipped",
                "repeated_lines": f"a line with letters whose normalised form (lower case, digits as 0, spaces "
                                  f"collapsed) occurs in >= {REPEATED_LINE_PAGES} pages of the same package is removed",
                "page_filters": f">= {MIN_WORDS} words, >= {MIN_STOPWORD_RATIO} of words English stopwords, "
                                f">= {MIN_ASCII_LETTER_RATIO} of letters ASCII",
                "dedup": f"exact: SHA-256 of the lower-cased word sequence; near: MinHash {MINHASH} over word "
                         f"5-shingles (LSH bands), later page dropped; package then path order",
                "removed": {
                    "repeated_lines": sum(s["repeated_lines_removed"] for s in stats.values()),
                    "repeated_line_chars": sum(s["repeated_line_chars_removed"] for s in stats.values()),
                    "pages_too_short": sum(s["too_short"] for s in stats.values()),
                    "pages_not_english": sum(s["not_english"] for s in stats.values()),
                    "pages_exact_duplicates": sum(s.get("exact_duplicates", 0) for s in stats.values()),
                    "pages_near_duplicates": sum(s.get("near_duplicates", 0) for s in stats.values()),
                },
            },
            "inputs": inputs,
            "tokenizer": {f: sha256_file(os.path.join(REPO, "assets", "gpt2", f)) for f in ("encoder.json", "vocab.bpe")},
            "packages": [{**info, **stats[info["package"]]} for info in debs],
            "tools": tool_versions(),
            "outputs": files,
        }
        write_json(out.temp_path("MANIFEST.json"), manifest)
        log("compressing the bundle (xz -9e)")
        members = [(f"corpus/{name}", tmp) for tmp, name in
                   [(t, os.path.basename(f)) for t, f in out.pending]]
        bundle_tmp = out.temp_path("corpus_text.tar.xz")
        size, sha = write_bundle(bundle_tmp, members, args.xz_threads)
        with open(out.temp_path("corpus_text.tar.xz.sha256"), "w") as f:
            f.write(f"{sha}  corpus_text.tar.xz\n")
        out.commit()
    except BaseException:
        out.discard()
        raise
    log(f"bundle {os.path.join(out.out_dir, 'corpus_text.tar.xz')}: {size:,} bytes ({size / 2**20:.1f} MiB)")
    log(f"train {train_tokens:,} tokens; done in {time.time() - t0:.0f} s")


def main(argv=None):
    args = parse_args(argv)
    try:
        build(args)
    except CorpusError as e:
        print(f"build_corpus: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
