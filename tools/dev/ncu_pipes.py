#!/usr/bin/env python3
"""Per kernel, how busy each unit was: the mean over its launches of ncu's percentages (tools/dev/gpu_quick.sh
PIPES=..., `ncu --metrics <METRICS below> --csv --page raw`). A kernel near 100% on one unit is bound by it;
one low everywhere is bound by latency (dependencies, barriers, too few warps).
usage: ncu_pipes.py ncu.csv"""
import csv
import io
import sys
from collections import defaultdict

from ncu_summary import read_csv_text, short_name

# (metric, column title); ncu_pipes.py --metrics prints the list for ncu's --metrics
METRICS = [
    ("gpu__time_duration.sum", "us"),
    ("sm__warps_active.avg.pct_of_peak_sustained_active", "warps%"),
    ("sm__inst_issued.avg.pct_of_peak_sustained_active", "issue%"),
    ("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active", "tensor%"),
    ("l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed", "smem%"),
    ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum", "conflicts"),
    ("l1tex__data_pipe_lsu_wavefronts_mem_shared.sum", "smem wavefronts"),
    ("lts__throughput.avg.pct_of_peak_sustained_elapsed", "L2%"),
    ("dram__throughput.avg.pct_of_peak_sustained_elapsed", "dram%"),
]


def main(path):
    lines = [l for l in read_csv_text(path).splitlines() if l.startswith('"')]
    if not lines:
        sys.exit(f"{path}: no CSV rows (did ncu run?)")
    missing = [m for m, _ in METRICS if m not in next(csv.reader([lines[0]]))]
    if missing:
        sys.exit(f"{path}: no column {missing[0]} (ncu run with `--metrics $(ncu_pipes.py --metrics)`?)")
    sums, count = defaultdict(lambda: defaultdict(float)), defaultdict(int)
    for r in csv.DictReader(io.StringIO("\n".join(lines))):
        try:
            float(r.get("gpu__time_duration.sum", "").replace(",", ""))
        except ValueError:
            continue  # the units row
        k = short_name(r.get("Kernel Name", "?"))
        count[k] += 1
        for m, _ in METRICS:
            try:
                sums[k][m] += float(r.get(m, "nan").replace(",", ""))
            except ValueError:
                sums[k][m] += float("nan")
    print(f"{'kernel':52s} " + " ".join(f"{t:>8s}" for _, t in METRICS[:5]) + f" {'conflict%':>9s} {'L2%':>6s} {'dram%':>6s}")
    for k in sorted(count, key=lambda k: -sums[k]["gpu__time_duration.sum"]):
        v = {m: sums[k][m] / count[k] for m, _ in METRICS}
        conf = 100 * v[METRICS[5][0]] / v[METRICS[6][0]] if v[METRICS[6][0]] else float("nan")
        print(f"{k[:52]:52s} {v[METRICS[0][0]] / 1e3:8.1f} " + " ".join(f"{v[m]:8.1f}" for m, _ in METRICS[1:5]) +
              f" {conf:9.1f} {v[METRICS[7][0]]:6.1f} {v[METRICS[8][0]]:6.1f}")


if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1] == "--metrics":
        print(",".join(m for m, _ in METRICS))
    elif len(sys.argv) == 2:
        main(sys.argv[1])
    else:
        sys.exit(__doc__)
