#!/usr/bin/env python3
"""TP and DP scaling of whole training steps: bench_train under mpirun, one rank per GPU.

  bench/bench_scaling.py                                  # TP 1/2/4/8 and DP 1/2/4/8, up to the GPUs present
  bench/bench_scaling.py --gpus 4 --json scaling.json     # at most 4 ranks
  bench/bench_scaling.py --dry-run                        # print the mpirun commands only
  bench/bench_scaling.py --device cpu --gpus 2 --configs configs/quickstart.yaml --set train.seq_len=32 ...

For each config (configs/hybrid_124m.yaml and configs/hybrid_1p3b.yaml by default):
  - TP strong scaling: `mpirun -np T bench_train --set parallel.tp=T`, the same batch (train.batch_size
    sequences) split by head over T GPUs; efficiency = tokens/s(T) / (T x tokens/s(1)).
  - DP weak scaling: `mpirun -np D bench_train --set parallel.tp=1`, train.batch_size sequences per
    rank (D times the tokens per step); efficiency = tokens/s(D) / (D x tokens/s(1)).
tokens/s counts every rank's tokens (bench_train: dp x batch x seq_len per step). A layout the config
cannot take (e.g. 12 heads over TP = 8) is reported as failed with bench_train's message, and the
others still run. Prints a table and writes the results as JSON (--json). Standard library only.

As a test (ctest): --require-all fails on any failed run; --check-losses RTOL compares every TP run's
first and last loss with the TP = 1 run's (the same batches: TP must not change the numbers beyond
rounding); --min-gpus N exits with status 77 (ctest's skip) when fewer GPUs are present.
"""

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

DEFAULT_CONFIGS = ["configs/hybrid_124m.yaml", "configs/hybrid_1p3b.yaml"]
SIZES = [1, 2, 4, 8]


def count_gpus():
    """GPUs that nvidia-smi lists (0 when it is missing or fails)."""
    if shutil.which("nvidia-smi") is None:
        return 0
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def mpirun_prefix(mpirun, np, oversubscribe):
    """mpirun -np N with what Open MPI needs: no binding (each rank picks its GPU), and
    --oversubscribe when asked (more ranks than cores, e.g. CPU tests)."""
    cmd = [mpirun, "-np", str(np)]
    try:
        version = subprocess.run([mpirun, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        version = ""
    if "Open MPI" in version or "OpenRTE" in version:
        cmd += ["--bind-to", "none"]
        if oversubscribe:
            cmd.append("--oversubscribe")
    return cmd


def run_env():
    env = dict(os.environ)
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # Open MPI refuses root without these (containers)
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    return env


def plan(args, ranks_max):
    """The runs: (config, mode, tp, dp)."""
    runs = []
    for config in args.configs:
        if "tp" in args.modes:
            for t in args.tp:
                if t <= ranks_max:
                    runs.append((config, "tp", t, 1))
        if "dp" in args.modes:
            for d in args.dp:
                if d <= ranks_max and not ("tp" in args.modes and d == 1 and 1 in args.tp):
                    runs.append((config, "dp", 1, d))  # DP 1 is TP 1: run once, shared
    return runs


def command(args, prefix, config, tp, dp, json_path):
    bench = [args.bench, "--config", config, "--set", f"parallel.tp={tp}"]
    for s in args.set:
        bench += ["--set", s]
    bench += ["--steps", str(args.steps), "--warmup", str(args.warmup), "--device", args.device, "--json", json_path]
    return prefix + bench


def run_one(cmd, timeout):
    """Runs cmd; returns (result dict or None, error message)."""
    json_path = cmd[cmd.index("--json") + 1]
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=run_env())
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s"
    wall = time.time() - t0
    if p.returncode != 0 or not os.path.exists(json_path):
        lines = (p.stderr + "\n" + p.stdout).splitlines()
        first = next((i for i, l in enumerate(lines) if "error" in l.lower()), None)
        if first is None:
            return None, (p.stderr.strip().splitlines() or ["exit status %d" % p.returncode])[-1].strip()
        msg = [lines[first].strip()]  # the error line and its "  - ..." items
        msg += [l.strip() for l in lines[first + 1:first + 8] if l.startswith("  - ")]
        return None, " ".join(msg)
    with open(json_path) as f:
        r = json.load(f)
    r["wall_s"] = wall
    return r, ""


def efficiency(rows):
    """tokens/s(N) / (N x tokens/s(1)) within each config and mode (the 1-rank run is shared)."""
    base = {}
    for r in rows:
        if r["ok"] and r["ranks"] == 1:
            base[r["config"]] = r["tok_per_s"]
    for r in rows:
        b = base.get(r["config"])
        r["efficiency"] = r["tok_per_s"] / (r["ranks"] * b) if r["ok"] and b else None


def check_losses(rows, rtol):
    """TP runs see the batches of TP 1 (one DP rank): their losses must agree to rounding."""
    ok = True
    base = {r["config"]: r for r in rows if r["ok"] and r["mode"] == "tp" and r["tp"] == 1}
    for r in rows:
        if not (r["ok"] and r["mode"] == "tp" and r["tp"] > 1):
            continue
        b = base.get(r["config"])
        if b is None:
            print(f"bench_scaling: FAILED: no TP 1 run of {r['config']} to compare TP {r['tp']} with")
            ok = False
            continue
        for key in ("first_loss", "last_loss"):
            err = abs(r[key] - b[key]) / max(abs(b[key]), 1e-30)
            good = err <= rtol
            ok = ok and good
            print(f"{'ok' if good else 'FAILED'}: {os.path.basename(r['config'])} TP {r['tp']} {key} {r[key]:.6f} vs "
                  f"TP 1 {b[key]:.6f} (relative {err:.2e}, tolerance {rtol:.0e})")
    if not any(r["ok"] and r["mode"] == "tp" and r["tp"] > 1 for r in rows):
        print("bench_scaling: FAILED: --check-losses found no TP > 1 run")
        ok = False
    return ok


def print_table(rows, out=sys.stdout):
    head = f"{'config':<28} {'mode':<4} {'tp':>3} {'dp':>3} {'step ms':>10} {'tokens/s':>12} {'tok/s/GPU':>11} " \
           f"{'eff':>6} {'MFU':>6}  status"
    print(head, file=out)
    print("-" * len(head), file=out)
    for r in rows:
        name = os.path.splitext(os.path.basename(r["config"]))[0]
        if r["ok"]:
            eff = f"{100 * r['efficiency']:.0f}%" if r["efficiency"] is not None else "-"
            print(f"{name:<28} {r['mode']:<4} {r['tp']:>3} {r['dp']:>3} {r['step_ms']:>10.2f} {r['tok_per_s']:>12.0f} "
                  f"{r['tok_per_s'] / r['ranks']:>11.0f} {eff:>6} {100 * r['mfu']:>5.1f}%  ok", file=out)
        else:
            print(f"{name:<28} {r['mode']:<4} {r['tp']:>3} {r['dp']:>3} {'-':>10} {'-':>12} {'-':>11} {'-':>6} "
                  f"{'-':>6}  failed: {r['error']}", file=out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", default="build/bench/bench_train", help="the bench_train executable")
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--configs", nargs="+", default=DEFAULT_CONFIGS)
    ap.add_argument("--gpus", type=int, default=None, help="ranks at most (default: the GPUs nvidia-smi lists)")
    ap.add_argument("--tp", type=int, nargs="+", default=SIZES, help="TP sizes (default 1 2 4 8)")
    ap.add_argument("--dp", type=int, nargs="+", default=SIZES, help="DP sizes (default 1 2 4 8)")
    ap.add_argument("--modes", nargs="+", choices=["tp", "dp"], default=["tp", "dp"])
    ap.add_argument("--device", default="auto", help="bench_train --device: auto, cuda or cpu")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--set", action="append", default=[], help="a config override for every run (repeatable)")
    ap.add_argument("--oversubscribe", action="store_true", help="more ranks than cores (Open MPI; CPU tests)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per run")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    ap.add_argument("--require-all", action="store_true", help="exit 1 when any run fails")
    ap.add_argument("--check-losses", type=float, metavar="RTOL",
                    help="exit 1 unless every TP run's first and last loss match TP 1's within RTOL (relative)")
    ap.add_argument("--min-gpus", type=int, default=0, help="exit 77 (skipped) with fewer GPUs than this")
    args = ap.parse_args()

    if args.min_gpus and count_gpus() < args.min_gpus:
        print(f"bench_scaling: skipped: {count_gpus()} GPUs, this run needs {args.min_gpus}")
        return 77
    gpus = args.gpus if args.gpus is not None else count_gpus()
    if gpus < 1:
        if args.device == "cpu":
            gpus = 1
        else:
            sys.exit("bench_scaling: no GPU found (nvidia-smi); give --gpus N, or --device cpu --gpus N for CPU ranks")
    runs = plan(args, gpus)
    if not runs:
        sys.exit("bench_scaling: nothing to run (no TP/DP size fits in %d ranks)" % gpus)
    if not args.dry_run and not os.path.exists(args.bench):
        sys.exit(f"bench_scaling: {args.bench} not found; build it (cmake --build build --target bench_train) or "
                 "pass --bench")

    tmp = tempfile.mkdtemp(prefix="bench_scaling_")
    rows = []
    for config, mode, tp, dp in runs:
        ranks = tp * dp
        json_path = os.path.join(tmp, f"{os.path.basename(config)}_tp{tp}_dp{dp}.json")
        cmd = command(args, mpirun_prefix(args.mpirun, ranks, args.oversubscribe), config, tp, dp, json_path)
        print(("" if args.dry_run else "# ") + shlex.join(cmd), flush=True)
        if args.dry_run:
            continue
        r, err = run_one(cmd, args.timeout)
        row = {"config": config, "mode": mode, "tp": tp, "dp": dp, "ranks": ranks, "ok": r is not None,
               "error": err, "command": shlex.join(cmd)}
        if r is not None:
            row.update({k: r[k] for k in ("step_ms", "tok_per_s", "mfu", "params", "peak_mem_gib", "forward_ms",
                                          "backward_ms", "optimizer_ms", "first_loss", "last_loss", "device")})
            row["wall_s"] = r["wall_s"]
        rows.append(row)
        if mode == "tp" and tp == 1 and "dp" in args.modes and 1 in args.dp:
            rows.append(dict(row, mode="dp"))  # DP 1 is the same run
    shutil.rmtree(tmp, ignore_errors=True)
    if args.dry_run:
        return 0

    efficiency(rows)
    print()
    print_table(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpus": gpus, "device": args.device, "steps": args.steps, "warmup": args.warmup,
                       "sets": args.set, "results": rows}, f, indent=1)
            f.write("\n")
        print(f"\nwrote {args.json}")
    status = 0 if any(r["ok"] for r in rows) else 1  # a layout the config cannot take is a row, not a failure
    if args.require_all and not all(r["ok"] for r in rows):
        print("bench_scaling: FAILED: some runs failed (--require-all)")
        status = 1
    if args.check_losses is not None and not check_losses(rows, args.check_losses):
        status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
