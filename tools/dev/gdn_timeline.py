#!/usr/bin/env python3
"""Per-CTA timeline of the GDN tensor-core kernels, from `bench_gdn --timeline FILE.csv`.

Prints, per shape and kernel: CTAs, first start and last end (us from the first CTA), the SM time
its CTAs held (sum of their durations, SM-ms), the SMs it ran on, a CTA's mean time and the SMs'
clock while it ran (cycles over time, MHz); with --png, draws one row per
SM, a bar per CTA, coloured by kernel (CTAs sharing an SM overlap in its row).

    tools/dev/gdn_timeline.py timeline.csv [--png timeline.png] [--shape B1_T32768_H16_D128]
"""
import argparse
import collections
import csv
import sys


COLUMNS = ("shape", "kernel", "sm", "start_us", "end_us", "cycles")


def load(path):
    rows = collections.defaultdict(list)
    try:
        f = open(path, newline="")
    except OSError as e:
        sys.exit(f"gdn_timeline: cannot read {path}: {e.strerror}")
    with f:
        reader = csv.DictReader(f)
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            sys.exit(f"gdn_timeline: {path} is not bench_gdn --timeline's CSV (no column {', '.join(missing)})")
        for line, r in enumerate(reader, start=2):
            try:
                rows[r["shape"]].append(
                    (r["kernel"], int(r["sm"]), float(r["start_us"]), float(r["end_us"]), int(r["cycles"])))
            except (TypeError, ValueError):
                sys.exit(f"gdn_timeline: {path}:{line}: a malformed row")
    return rows


def summary(shape, stamps):
    print(f"{shape}: {len(stamps)} CTAs, {max(s[3] for s in stamps):.1f} us")
    print(f"  {'kernel':<14} {'CTAs':>6} {'start':>9} {'end':>9} {'SM-ms':>8} {'SMs':>5} {'CTA us':>8} {'MHz':>6}")
    by_kernel = collections.defaultdict(list)
    for s in stamps:
        by_kernel[s[0]].append(s)
    for name, ks in sorted(by_kernel.items(), key=lambda kv: min(s[2] for s in kv[1])):
        held = sum(s[3] - s[2] for s in ks)
        print(f"  {name:<14} {len(ks):>6} {min(s[2] for s in ks):>9.1f} {max(s[3] for s in ks):>9.1f} "
              f"{held * 1e-3:>8.2f} {len({s[1] for s in ks}):>5} {held / len(ks):>8.2f} "
              f"{sum(s[4] for s in ks) / held if held > 0 else 0:>6.0f}")


def draw(shape, stamps, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = sorted({s[0] for s in stamps}, key=lambda n: min(s[2] for s in stamps if s[0] == n))
    colours = {n: plt.cm.tab10(i % 10) for i, n in enumerate(names)}
    fig, ax = plt.subplots(figsize=(14, 7))
    for name in names:
        ks = [s for s in stamps if s[0] == name]
        ax.barh([s[1] for s in ks], [s[3] - s[2] for s in ks], left=[s[2] for s in ks], height=0.8,
                color=colours[name], alpha=0.6, label=name, linewidth=0)
    ax.set_xlabel("us from the first CTA's start")
    ax.set_ylabel("SM")
    ax.set_title(f"{shape}: one forward + backward, a bar per CTA")
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--png", help="draw the timeline here (the first shape, or --shape)")
    ap.add_argument("--shape", help="only this shape (as bench_gdn names it)")
    a = ap.parse_args()
    rows = load(a.csv)
    if not rows:
        sys.exit(f"gdn_timeline: no stamps in {a.csv}")
    if a.shape and a.shape not in rows:
        sys.exit(f"gdn_timeline: no shape {a.shape} in {a.csv} (it has {', '.join(rows)})")
    shapes = [a.shape] if a.shape else list(rows)
    for shape in shapes:
        summary(shape, rows[shape])
    if a.png:
        draw(shapes[0], rows[shapes[0]], a.png)


if __name__ == "__main__":
    main()
