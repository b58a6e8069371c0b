#!/usr/bin/env python3
"""tiktoken vs deltatron's tokenizer on the same text: a side-by-side table and JSON.

Times tiktoken's gpt2 encode_ordinary single-threaded and encode_ordinary_batch with N threads
(best of R passes), runs bench_tokenizer (the C++ side) on the same input, checks that both
produce the same number of tokens, and prints MB/s and tokens/s for each.
  bench/bench_tokenizer.py [--input FILE] [--threads N] [--repeat R] [--json OUT]
                           [--cpp-bench build/bench/bench_tokenizer]
Documents are read as bench_tokenizer.cpp reads them: the "text" field of each line of a .jsonl,
else the file cut at the first newline after every 64 KiB.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import tiktoken
import tiktoken.load

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GPT2_PAT = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""


def gpt2_encoding(tokenizer_dir):
    ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(
        vocab_bpe_file=os.path.join(tokenizer_dir, "vocab.bpe"),
        encoder_json_file=os.path.join(tokenizer_dir, "encoder.json"))
    return tiktoken.Encoding(name="gpt2", pat_str=GPT2_PAT, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": 50256})


def read_documents(path):
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".jsonl"):
        # split on "\n" only: str.splitlines would also cut at U+2028 and friends inside texts
        return [json.loads(line)["text"] for line in data.split(b"\n") if line.strip()]
    docs, at = [], 0
    while at < len(data):
        end = min(len(data), at + (64 << 10))
        nl = data.find(b"\n", end)
        end = len(data) if nl < 0 else nl + 1
        docs.append(data[at:end].decode("utf-8", "replace"))
        at = end
    return docs


def best_of(repeat, fn):
    """Best wall-clock and best CPU seconds (all threads of the process) over `repeat` runs."""
    best, best_cpu, out = float("inf"), float("inf"), None
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    return best, best_cpu, out


def row(seconds, cpu_seconds, tokens, n_bytes):
    return {"seconds": seconds, "tokens": tokens, "mb_per_s": n_bytes / seconds / 1e6,
            "tokens_per_s": tokens / seconds, "cpu_seconds": cpu_seconds,
            "mb_per_cpu_s": n_bytes / cpu_seconds / 1e6}


def main():
    ap = argparse.ArgumentParser(description="tiktoken vs deltatron tokenizer throughput")
    ap.add_argument("--input", default=os.path.join(REPO, "assets", "fineweb-edu", "fineweb_edu.jsonl"))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--tokenizer", default=os.path.join(REPO, "assets", "gpt2"))
    ap.add_argument("--cpp-bench", default=os.path.join(REPO, "build", "bench", "bench_tokenizer"),
                    help="the bench_tokenizer binary ('' to skip the C++ side)")
    args = ap.parse_args()

    enc = gpt2_encoding(args.tokenizer)
    docs = read_documents(args.input)
    n_bytes = sum(len(d.encode("utf-8")) for d in docs)
    s1, c1, ids1 = best_of(args.repeat, lambda: [enc.encode_ordinary(d) for d in docs])
    sn, cn, idsn = best_of(args.repeat, lambda: enc.encode_ordinary_batch(docs, num_threads=args.threads))
    tokens = sum(len(x) for x in ids1)
    assert tokens == sum(len(x) for x in idsn)
    result = {"input": args.input, "documents": len(docs), "bytes": n_bytes, "threads": args.threads,
              "repeat": args.repeat,
              "tiktoken": {"version": tiktoken.__version__, "single": row(s1, c1, tokens, n_bytes),
                           "multi": row(sn, cn, tokens, n_bytes)}}

    if args.cpp_bench:
        if not os.path.exists(args.cpp_bench):
            sys.exit(f"bench_tokenizer.py: no C++ benchmark at {args.cpp_bench}; build it "
                     "(cmake --build build --target bench_tokenizer) or pass --cpp-bench ''")
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "cpp.json")
            subprocess.run([args.cpp_bench, "--input", args.input, "--threads", str(args.threads),
                            "--repeat", str(args.repeat), "--json", out, "--tokenizer", args.tokenizer],
                           check=True, stdout=subprocess.DEVNULL)
            with open(out) as f:
                cpp = json.load(f)
        if cpp["single"]["tokens"] != tokens or cpp["bytes"] != n_bytes:
            sys.exit(f"bench_tokenizer.py: token counts differ: tiktoken {tokens}, "
                     f"deltatron {cpp['single']['tokens']} (bytes {n_bytes} vs {cpp['bytes']})")
        result["deltatron"] = {"single": cpp["single"], "multi": cpp["multi"],
                               "load_seconds": cpp["load_seconds"]}

    print(f"{args.input}: {len(docs)} documents, {n_bytes / 1e6:.2f} MB, {tokens} tokens, best of {args.repeat}")
    # MB per CPU-second: what one core does, comparable even on a machine busy with other work.
    print(f"{'':24}{'MB/s':>10}{'tokens/s':>14}{'speed-up':>10}{'MB/CPU-s':>10}{'speed-up':>10}")
    for threads, key in ((1, "single"), (args.threads, "multi")):
        base = result["tiktoken"][key]
        print(f"{f'tiktoken  {threads:>2} thread(s)':24}{base['mb_per_s']:>10.1f}{base['tokens_per_s']:>14.0f}"
              f"{'1.00x':>10}{base['mb_per_cpu_s']:>10.1f}{'1.00x':>10}")
        if "deltatron" in result:
            ours = result["deltatron"][key]
            print(f"{f'deltatron {threads:>2} thread(s)':24}{ours['mb_per_s']:>10.1f}{ours['tokens_per_s']:>14.0f}"
                  f"{ours['mb_per_s'] / base['mb_per_s']:>9.2f}x{ours['mb_per_cpu_s']:>10.1f}"
                  f"{ours['mb_per_cpu_s'] / base['mb_per_cpu_s']:>9.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
