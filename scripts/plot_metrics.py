#!/usr/bin/env python3
"""Plot train and validation loss curves of one or several Deltatron run directories.

    scripts/plot_metrics.py runs/quickstart                      # -> runs/quickstart/loss.png
    scripts/plot_metrics.py runs/hybrid runs/softmax -o cmp.png  # several runs on one figure
    scripts/plot_metrics.py runs/a --x tokens --smooth 20

Each run directory holds metrics.jsonl (one JSON object per line): training lines carry `step`,
`loss` and `tokens`; evaluation lines carry `step` and `val_loss`.
"""
import argparse
import json
import math
import os
import sys


def read_metrics(run_dir):
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.isfile(path):
        sys.exit(f"plot_metrics: error: {path} does not exist (is {run_dir} a run directory?)")
    train, val = [], []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"plot_metrics: error: {path}:{n}: not JSON ({e})")
            if "val_loss" in rec:
                val.append(rec)
            elif rec.get("loss") is not None and not rec.get("skipped", False):
                train.append(rec)  # skipped steps (non-finite loss, no update) carry loss null
    if not train and not val:
        sys.exit(f"plot_metrics: error: {path} has no training or evaluation lines")
    return train, val


def smooth(values, window):
    if window <= 1:
        return values
    out, acc = [], []
    for v in values:
        acc.append(v)
        if len(acc) > window:
            acc.pop(0)
        out.append(sum(acc) / len(acc))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="run directories (each with metrics.jsonl)")
    ap.add_argument("-o", "--out", help="output PNG (default: <first run>/loss.png)")
    ap.add_argument("--x", choices=["step", "tokens"], default="step", help="x axis")
    ap.add_argument("--smooth", type=int, default=1, help="moving-average window for the train loss")
    ap.add_argument("--title", default="Deltatron loss")
    args = ap.parse_args()

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5), dpi=120)
    for i, run in enumerate(args.runs):
        train, val = read_metrics(run)
        color = f"C{i}"
        label = os.path.basename(os.path.normpath(run))
        if train:
            xs = [r.get(args.x, r["step"]) for r in train]
            ax.plot(xs, smooth([r["loss"] for r in train], args.smooth), color=color, alpha=0.8,
                    label=f"{label} train")
        if val:
            if args.x == "tokens" and train:
                # eval lines may not carry tokens: map their step onto the train lines' tokens
                tok = {r["step"]: r.get("tokens", r["step"]) for r in train}
                xs = [r.get("tokens", tok.get(r["step"], math.nan)) for r in val]
            else:
                xs = [r["step"] for r in val]
            ax.plot(xs, [r["val_loss"] for r in val], color=color, linestyle="--", marker="o", markersize=3,
                    label=f"{label} val")
    ax.set_xlabel(args.x)
    ax.set_ylabel("cross-entropy (nats)")
    ax.set_title(args.title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    out = args.out or os.path.join(args.runs[0], "loss.png")
    fig.tight_layout()
    fig.savefig(out)
    print(f"plot_metrics: wrote {out}")


if __name__ == "__main__":
    main()
