#!/usr/bin/env python3
"""Turn FineWeb-Edu into Deltatron token shards.

Streams HuggingFaceFW/fineweb-edu with Hugging Face `datasets` (nothing is downloaded in
full) and pipes it, as JSON lines, into `deltatron prepare --input -`, which tokenises with
all cores and writes OUT/fineweb_edu_val_000000.bin (the first documents: --val-docs, --val-tokens,
or by default enough for the default config's evaluation, at most a tenth of the documents) and
OUT/fineweb_edu_train_000001.bin, ... (llm.c's shard format).

Offline: --local FILE.jsonl reads JSON lines (a "text" field per line) from a file instead
and never imports `datasets`; the bundled sample is assets/fineweb-edu/fineweb_edu.jsonl.

Examples:
  # the bundled 170-document sample, no internet needed
  scripts/prepare_fineweb_edu.py --local assets/fineweb-edu/fineweb_edu.jsonl --out shards/fineweb_edu
  # the first 100k documents of sample-10BT (pip install datasets)
  scripts/prepare_fineweb_edu.py --max-docs 100000 --out shards/fineweb_edu
  # all of sample-100BT, in shards of 100M tokens
  scripts/prepare_fineweb_edu.py --name sample-100BT --out /data/fineweb_edu_100BT
"""

import argparse
import json
import os
import shutil
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATASET = "HuggingFaceFW/fineweb-edu"


def find_deltatron(given):
    """The `deltatron` binary: --deltatron, $DELTATRON, build/deltatron in this checkout, then $PATH."""
    for cand in (given, os.environ.get("DELTATRON"), os.path.join(REPO, "build", "deltatron")):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    found = shutil.which("deltatron")
    if found:
        return found
    sys.exit("prepare_fineweb_edu: cannot find the deltatron binary; build it (scripts/build.sh) "
             "or pass --deltatron PATH")


def local_lines(path, max_docs):
    """JSON lines of a local file, as they are (blank lines too, so that line numbers in errors match).
    The file is opened here, before deltatron starts, so that a wrong path fails at once."""
    try:
        f = open(path, "rb")
    except OSError as e:
        sys.exit(f"prepare_fineweb_edu: --local {path}: {e.strerror}")

    def lines():
        with f:
            docs = 0
            for line in f:
                if max_docs is not None and docs >= max_docs:
                    break
                if line.strip():
                    docs += 1
                yield line if line.endswith(b"\n") else line + b"\n"

    return lines()


def hub_lines(name, max_docs):
    """JSON lines streamed from the Hugging Face Hub. The import and the dataset lookup happen here,
    before deltatron starts, so that their errors come first and alone."""
    try:
        from datasets import load_dataset  # only here: the --local path must work without it
    except ImportError as e:
        sys.exit(f"prepare_fineweb_edu: downloading needs Hugging Face `datasets` (pip install datasets): {e}\n"
                 "Without internet, pass --local FILE.jsonl instead.")
    ds = load_dataset(DATASET, name=name, split="train", streaming=True)

    def lines():
        for i, row in enumerate(ds):
            if max_docs is not None and i >= max_docs:
                break
            yield (json.dumps({"text": row["text"]}, ensure_ascii=False) + "\n").encode("utf-8")

    return lines()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--name", default="sample-10BT",
                   help="FineWeb-Edu config: sample-10BT (default), sample-100BT, sample-350BT, default "
                        "(everything) or one dump such as CC-MAIN-2024-10")
    p.add_argument("--max-docs", type=int, default=None, help="stop after this many documents (default: all)")
    p.add_argument("--out", default=os.path.join("shards", "fineweb_edu"), help="output directory")
    p.add_argument("--local", metavar="FILE.jsonl",
                   help="read JSON lines (a \"text\" field per line) from this file instead of downloading; "
                        "does not need `datasets`")
    p.add_argument("--deltatron", help="the deltatron binary (default: $DELTATRON, build/deltatron, $PATH)")
    p.add_argument("--shard-name", default="fineweb_edu", help="shard file prefix (default fineweb_edu)")
    p.add_argument("--val-docs", type=int, help="documents held out for validation")
    p.add_argument("--val-tokens", type=int,
                   help="tokens held out for validation (deltatron's default: enough for the default config's "
                        "evaluation, at most a tenth of the documents)")
    p.add_argument("--shard-tokens", type=int, help="tokens per train shard (deltatron's default: 100M)")
    p.add_argument("--threads", type=int, help="tokeniser threads (default: all cores)")
    p.add_argument("--tokenizer", help="directory with GPT-2's encoder.json and vocab.bpe")
    p.add_argument("--overwrite", action="store_true", help="replace shards of the same name in --out")
    args = p.parse_args()
    if args.max_docs is not None and args.max_docs < 1:
        p.error("--max-docs must be at least 1")

    cmd = [find_deltatron(args.deltatron), "prepare", "--input", "-", "--out", args.out, "--name", args.shard_name]
    for flag, value in (("--val-docs", args.val_docs), ("--val-tokens", args.val_tokens),
                        ("--shard-tokens", args.shard_tokens),
                        ("--threads", args.threads), ("--tokenizer", args.tokenizer)):
        if value is not None:
            cmd += [flag, str(value)]
    if args.overwrite:
        cmd.append("--overwrite")

    lines = local_lines(args.local, args.max_docs) if args.local else hub_lines(args.name, args.max_docs)
    source = args.local or f"{DATASET} ({args.name})"
    print(f"prepare_fineweb_edu: {source} -> {args.out}", file=sys.stderr)
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE)
    try:
        for line in lines:
            proc.stdin.write(line)
        proc.stdin.close()
    except BrokenPipeError:
        pass  # deltatron stopped reading: it has printed why; its exit code says the rest
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    rc = proc.wait()
    if rc != 0:
        where = f" ('<stdin>' is {args.local})" if args.local else ""
        sys.exit(f"prepare_fineweb_edu: deltatron prepare failed with exit code {rc}{where}")


if __name__ == "__main__":
    main()
