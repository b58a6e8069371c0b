#!/usr/bin/env python3
"""Sum Nsight Compute kernel durations by kernel name.

Usage: tools/dev/ncu_summary.py [--decode-step] ncu.csv
  (from `ncu --metrics gpu__time_duration.sum --csv --page raw`)
Prints one line per kernel name, largest total first: total ms, share, launches, mean us.
--decode-step: only the kernels of the last whole decode step of `deltatron generate` (run with
--no-cuda-graph so that ncu sees each kernel), from the launch after the second-to-last
advance_kernel (a step's last kernel) through the last one.
"""
import csv
import io
import re
import sys
from collections import defaultdict


def short_name(name):
    """'void ns::(anonymous namespace)::kern<64, 32>(Args)' -> 'ns::kern<64, 32>'."""
    name = name.replace("(anonymous namespace)::", "").replace("unnamed>::", "")
    name = re.sub(r"^void ", "", name)
    depth, out = 0, []
    for ch in name:  # drop the parameter list: the first '(' outside template brackets
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            break
        out.append(ch)
    return "".join(out).strip()[:70]


def read_csv_text(path, what="ncu's CSV"):
    """The file's text, or a clear exit when it cannot be read (the scripts next to this one share it)."""
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError as e:
        sys.exit(f"{path}: cannot read {what}: {e.strerror}")


def decode_step(rows, path):
    """The rows of the last whole decode step: after the second-to-last advance_kernel, to the last."""
    ends = [i for i, r in enumerate(rows) if "advance_kernel" in r.get("Kernel Name", "")]
    if len(ends) < 2:
        sys.exit(f"{path}: {len(ends)} decode steps (advance_kernel launches) found, need 2; "
                 "profile `deltatron generate --no-cuda-graph --max-new-tokens 4` or more")
    return rows[ends[-2] + 1:ends[-1] + 1]


def main(path, step_only=False):
    text = read_csv_text(path)
    # ncu prints its own log lines ("==PROF==") before and between the CSV rows.
    lines = [l for l in text.splitlines() if l.startswith('"')]
    if not lines:
        sys.exit(f"{path}: no CSV rows (did ncu run? see the .err file next to it)")
    rows = list(csv.DictReader(io.StringIO("\n".join(lines))))
    if step_only:
        rows = decode_step(rows, path)
    total = defaultdict(float)
    count = defaultdict(int)
    for r in rows:
        v = r.get("gpu__time_duration.sum", "")
        try:
            ns = float(v.replace(",", ""))
        except ValueError:
            continue  # the units row
        name = r.get("Kernel Name", "?")
        short = short_name(name)
        total[short] += ns
        count[short] += 1
    all_ns = sum(total.values())
    print(f"{len(rows)} kernel launches, {all_ns / 1e6:.3f} ms in all")
    print(f"{'kernel':70s} {'ms':>9s} {'share':>6s} {'n':>5s} {'mean us':>8s}")
    for k in sorted(total, key=total.get, reverse=True):
        print(f"{k:70s} {total[k] / 1e6:9.3f} {100 * total[k] / all_ns:5.1f}% {count[k]:5d} {total[k] / count[k] / 1e3:8.1f}")


if __name__ == "__main__":
    args = sys.argv[1:]
    step = args[:1] == ["--decode-step"]
    if step:
        args = args[1:]
    if len(args) != 1:
        sys.exit(__doc__)
    main(args[0], step)
