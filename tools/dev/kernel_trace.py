#!/usr/bin/env python3
"""Summarise a kernel timeline from kernel_trace.cpp (CSV: start,end,graph,grid,block,name; ns).

    python3 tools/dev/kernel_trace.py trace.csv [--step-kernel embedding_forward] [--steps 20]

A step runs from one launch of --step-kernel (a kernel that opens every decode step) to the next.
Over the last --steps whole steps: each step's time, then per kernel (name, grid x block) its
launches a step, mean duration and time a step; then the last step's kernels in order: start from
the step's start, duration, and the gap from the previous kernel's end (negative: it started early,
a programmatic dependent launch waiting on the kernel before). Durations of kernels that start early
include their wait, so the gaps and the ends, not the durations, show a step's critical path.
"""
import argparse
import collections
import csv
import re
import sys


def short(name, grid, block):
    n = re.sub(r"\(anonymous namespace\)::", "", name)
    n = re.sub(r"^void ", "", n)
    n = re.sub(r"\(.*", "", n)
    return f"{n} g{grid}x{block}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--step-kernel", default="embedding_forward")
    ap.add_argument("--steps", type=int, default=20)
    a = ap.parse_args()
    ks = []
    try:
        f = open(a.csv)
    except OSError as e:
        sys.exit(f"kernel_trace.py: cannot read {a.csv}: {e.strerror}")
    with f:
        rows = csv.DictReader(f)
        missing = [c for c in ("start", "end", "grid", "block", "name") if c not in (rows.fieldnames or [])]
        if missing:
            sys.exit(f"kernel_trace.py: {a.csv} has no column {', '.join(missing)}: not a kernel_trace.cpp CSV")
        for line, r in enumerate(rows, start=2):
            try:
                ks.append((int(r["start"]), int(r["end"]), short(r["name"], r["grid"], r["block"])))
            except (TypeError, ValueError):
                sys.exit(f"kernel_trace.py: {a.csv}:{line}: a malformed row (start and end are integers, ns)")
    ks.sort()
    opens = [i for i, k in enumerate(ks) if a.step_kernel in k[2]]
    if len(opens) < 2:
        sys.exit(f"kernel_trace.py: fewer than two launches of {a.step_kernel!r} in {a.csv}: no whole step")
    steps = list(zip(opens, opens[1:]))[-a.steps:]
    times = [(ks[b][0] - ks[e][0]) / 1e3 for e, b in steps]
    print(f"{len(ks)} kernels; {len(steps)} steps: mean {sum(times) / len(times):.1f} us, "
          f"min {min(times):.1f}, max {max(times):.1f}")
    per = collections.defaultdict(list)
    for b, e in steps:
        for i in range(b, e):
            per[ks[i][2]].append((ks[i][1] - ks[i][0]) / 1e3)
    print(f"{'kernel':<72} {'a step':>7} {'mean us':>8} {'us a step':>10}")
    for n, v in sorted(per.items(), key=lambda x: -sum(x[1])):
        print(f"{n[:72]:<72} {len(v) / len(steps):>7.1f} {sum(v) / len(v):>8.2f} {sum(v) / len(steps):>10.1f}")
    b, e = steps[-1]
    t0 = prev_end = ks[b][0]
    print("--- the last step: start, duration, gap from the previous kernel's end (us)")
    for st, en, n in ks[b:e]:
        print(f"{(st - t0) / 1e3:8.1f} {(en - st) / 1e3:7.2f} {(st - prev_end) / 1e3:7.2f}  {n}")
        prev_end = en


if __name__ == "__main__":
    main()
