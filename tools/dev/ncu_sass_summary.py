#!/usr/bin/env python3
"""Sums ncu's source counters (tools/dev/gpu_quick.sh SASS=..., `--page source --print-source cuda,sass`
as CSV) by CUDA source line: warp-stall samples, instructions executed and the largest stall reasons;
then the lines with the most excess shared-memory wavefronts (bank conflicts, misaligned copies).
usage: ncu_sass_summary.py FILE.csv [TOP]"""
import csv
import io
import sys

from ncu_summary import read_csv_text


def main():
    if len(sys.argv) not in (2, 3) or (len(sys.argv) == 3 and not sys.argv[2].isdigit()):
        sys.exit(__doc__)
    path, top = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 25
    rows, header, fname, func = [], None, "?", "?"
    for rec in csv.reader(io.StringIO(read_csv_text(path, "ncu's source-page CSV"), newline="")):
        if not rec:
            continue
        if rec[0] == "File Path":
            fname = rec[1].split("/")[-1]
        elif rec[0] == "Function Name":
            func = rec[1]
        elif rec[0] == "Line No":
            header = rec
        elif header and rec[0].isdigit():
            d = dict(zip(header, rec))
            d["Line No"], d["file"], d["src"] = int(rec[0]), fname, rec[1]
            rows.append(d)
    if not rows:
        sys.exit(f"{path}: no source rows (was it built with -lineinfo?)")

    def num(d, k):
        try:
            return float(d.get(k, "0") or 0)
        except ValueError:
            return 0.0

    stalls = [k for k in header if k.startswith("stall_") and "Not Issued" not in k]
    samples = "Warp Stall Sampling (All Samples)"
    total = sum(num(d, samples) for d in rows) or 1.0
    insts = sum(num(d, "Instructions Executed") for d in rows)
    print(f"{func}\n{total:.0f} samples, {insts:.0f} warp instructions executed")
    by_reason = {k: sum(num(d, k) for d in rows) for k in stalls}
    print("stalls: " + ", ".join(f"{k[6:]} {100 * v / total:.0f}%" for k, v in
                                 sorted(by_reason.items(), key=lambda kv: -kv[1]) if v / total >= 0.02))
    print(f"{'samples':>8} {'insts':>9}  {'file:line':<24} top stalls | source")
    for d in sorted(rows, key=lambda d: -num(d, samples))[:top]:
        s = num(d, samples)
        reasons = sorted(((num(d, k), k[6:]) for k in stalls), reverse=True)[:2]
        why = " ".join(f"{r}{100 * v / max(s, 1):.0f}" for v, r in reasons if v > 0)
        print(f"{100 * s / total:7.1f}% {num(d, 'Instructions Executed'):9.0f}  {d['file'] + ':' + str(d['Line No']):<24}"
              f" {why:<22}| {d['src'].strip()[:90]}")
    shared_excess(rows, num, 8)


def shared_excess(rows, num, top):
    """The lines whose shared-memory accesses took more wavefronts than conflict-free ones would."""
    wf, ex = "L1 Wavefronts Shared", "L1 Wavefronts Shared Excessive"
    total, excess = sum(num(d, wf) for d in rows), sum(num(d, ex) for d in rows)
    print(f"shared memory: {total:.0f} wavefronts, {excess:.0f} of them excess ({100 * excess / max(total, 1):.0f}%)")
    for d in sorted(rows, key=lambda d: -num(d, ex))[:top]:
        if num(d, ex) <= 0:
            break
        print(f"{num(d, ex):10.0f} of {num(d, wf):10.0f}  {d['file'] + ':' + str(d['Line No']):<24} | "
              f"{d['src'].strip()[:90]}")


if __name__ == "__main__":
    main()
