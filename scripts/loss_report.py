#!/usr/bin/env python3
"""The report of the GDN-versus-softmax loss comparison, from the run directories that
scripts/loss_comparison.sh writes (every number in it comes from those files).

    scripts/loss_report.py --out runs/loss_comparison --report docs/experiments/loss_comparison.md

Reads OUT/plan.json (the sitting's setup), OUT/<model>_s<seed>/ (config.yaml, metrics.jsonl, eval.json,
sittings.jsonl, finished.json), OUT/info/<model>.json (`deltatron info CONFIG --json`) and
OUT/corpus_manifest.json; writes the Markdown report and, beside it, a PNG of the validation loss
against tokens (the in-training val_loss on the headline set).
"""
import argparse
import datetime
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_metrics import read_metrics  # noqa: E402  (scripts/plot_metrics.py)

MODELS = ["softmax_124m", "gdn_124m", "hybrid_gqa_124m", "hybrid_mla_124m"]
SETS = [("fineweb_edu", "FineWeb-Edu val (headline)"), ("fineweb", "FineWeb val"), ("docs", "docs val")]
LENGTHS = [("1K", 1024), ("8K", 8192), ("32K", 32768), ("128K", 131072)]
BYTES_PER_ELEMENT = 2  # the formulas' cache and state in bf16
FULL_TOKENS = 2_500_000_000
FULL_GPUS = 8
OVERHEAD_S = 60  # start-up, checkpoints and evaluation of a run (scripts/loss_comparison.sh's estimate)


def fail(msg):
    sys.exit(f"loss_report: error: {msg}")


def load_json(path, default=None):
    if not os.path.isfile(path):
        return default
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: not readable JSON ({e})")


def load_jsonl(path):
    out = []
    if os.path.isfile(path):
        with open(path) as f:
            for line in f:
                if line.strip():
                    out.append(json.loads(line))
    return out


def load_yaml(path):
    if not os.path.isfile(path):
        return None
    import yaml
    with open(path) as f:
        return yaml.safe_load(f)


def read_run(out, name, model, seed):
    rd = os.path.join(out, name)
    run = {"name": name, "model": model, "seed": seed, "dir": rd, "train": [], "val": []}
    if os.path.isfile(os.path.join(rd, "metrics.jsonl")):
        try:
            run["train"], run["val"] = read_metrics(rd)
        except SystemExit:
            pass  # an empty metrics file: a run that has not logged a step yet
    run["eval"] = load_json(os.path.join(rd, "eval.json"))
    run["finished"] = load_json(os.path.join(rd, "finished.json"))
    run["sittings"] = load_jsonl(os.path.join(rd, "sittings.jsonl"))
    run["config"] = load_yaml(os.path.join(rd, "config.yaml"))
    rates = [r["tokens_per_s"] for r in run["train"] if r.get("tokens_per_s")]
    run["tokens_per_s"] = statistics.median(rates) if rates else None
    peaks = [r["peak_mem_gib"] for r in run["train"] + run["val"] if r.get("peak_mem_gib") is not None]
    run["peak_gib"] = max(peaks) if peaks else None
    run["wall_s"] = sum(s.get("wall_s", 0) for s in run["sittings"])
    last = run["train"][-1] if run["train"] else {}
    run["tokens"] = (run["finished"] or {}).get("tokens", last.get("tokens"))
    run["step"] = last.get("step", 0)
    return run


def find_runs(out):
    runs = []
    for name in sorted(os.listdir(out)):
        m = re.fullmatch(r"(.+)_s(\d+)", name)
        if m and m.group(1) in MODELS and os.path.isdir(os.path.join(out, name)):
            runs.append(read_run(out, name, m.group(1), int(m.group(2))))
    return sorted(runs, key=lambda r: (MODELS.index(r["model"]), r["seed"]))


def mean_spread(values):
    """Mean and half the range over the seeds (None with one seed)."""
    if not values:
        return None, None
    return statistics.mean(values), ((max(values) - min(values)) / 2 if len(values) > 1 else None)


def fmt_loss(mean, spread):
    if mean is None:
        return "n/a"
    return f"{mean:.4f}" + (f" ± {spread:.4f}" if spread is not None else "")


def fmt_int(n):
    return "n/a" if n is None else f"{n:,}"


def fmt_bytes(n):
    if n is None:
        return "n/a"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"


def fmt_time(s):
    if s is None:
        return "n/a"
    s = int(round(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m{s % 60:02d}s"


def layer_kinds(info, config):
    """The mixer of each layer: `deltatron info`'s list, else the config's pattern."""
    layers = (info or {}).get("layers")
    if isinstance(layers, list) and layers:
        kinds = []
        for entry in layers:
            if isinstance(entry, dict):
                entry = entry.get("mixer") or entry.get("kind") or entry.get("type")
            kinds.append(str(entry))
        return kinds
    pattern = ((config or {}).get("model") or {}).get("layers")
    if isinstance(pattern, list):
        return [str(x) for x in pattern]
    if isinstance(pattern, str) and re.fullmatch(r"[\[\]\s,+*0-9a-z_]+", pattern):
        value = eval(pattern, {"__builtins__": {}}, {k: [k] for k in ("gdn", "attn", "mla")})  # "[gdn] * 3"

        def flat(x):
            return [y for e in x for y in flat(e)] if isinstance(x, list) else [x]
        return flat(value)
    return []


def formula(kinds, config):
    """The published decode memory, in elements: (state per sequence, cache per token, text)."""
    model = (config or {}).get("model") or {}
    attn, gdn, mla = model.get("attn") or {}, model.get("gdn") or {}, model.get("mla") or {}
    n = {k: kinds.count(k) for k in ("attn", "gdn", "mla")}
    state = cache = 0
    text = []
    if n["attn"]:
        d = attn.get("n_kv_heads", 12) * attn.get("head_dim", 64)
        cache += 2 * n["attn"] * d
        text.append(f"2·L·t·d = 2·{n['attn']}·t·{d}")
    if n["gdn"]:
        h, dk, dv = gdn.get("n_v_heads", 12), gdn.get("head_k_dim", 64), gdn.get("head_v_dim", 64)
        state += n["gdn"] * h * dk * dv
        text.append(f"L·H·d_k·d_v = {n['gdn']}·{h}·{dk}·{dv}")
    if n["mla"]:
        c = mla.get("kv_lora_rank", 256) + mla.get("qk_rope_head_dim", 32)
        cache += n["mla"] * c
        text.append(f"L·t·(d_c + d_rope) = {n['mla']}·t·{c}")
    return state, cache, " + ".join(text) or "n/a"


def find_tokens(manifest):
    """The training corpus's token count in a manifest, where one of the usual keys holds it."""
    for key in ("train_tokens", "tokens_train", "total_train_tokens", "total_tokens", "tokens"):
        if isinstance(manifest.get(key), int):
            return manifest[key]
    for value in manifest.values():
        if isinstance(value, dict) and isinstance(value.get("train_tokens"), int):
            return value["train_tokens"]
    return None


def render_manifest(manifest):
    """Every field of the manifest: scalars as a list, lists of objects as tables."""
    lines, tables = [], []
    for key, value in manifest.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            cols = []
            for v in value:
                cols += [c for c in v if c not in cols]
            rows = [f"| {' | '.join(cols)} |", "|" + " --- |" * len(cols)]
            for v in value:
                cells = [json.dumps(v[c]) if isinstance(v.get(c), (dict, list)) else str(v.get(c, "")) for c in cols]
                rows.append("| " + " | ".join(cells) + " |")
            tables += [f"`{key}`:", ""] + rows + [""]
        elif isinstance(value, dict):
            lines.append(f"- `{key}`: " + ", ".join(f"{k} = `{json.dumps(v)}`" for k, v in value.items()))
        else:
            lines.append(f"- `{key}`: `{value}`")
    return lines + [""] + tables


def plot(runs, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5), dpi=120)
    styles = ["-", "--", ":", "-."]
    for run in runs:
        pts = [(r["tokens"], r["val_loss"]) for r in run["val"] if r.get("tokens") is not None]
        if pts:
            color = f"C{MODELS.index(run['model'])}"
            ax.plot([p[0] for p in pts], [p[1] for p in pts], color=color, marker="o", markersize=3,
                    linestyle=styles[(run["seed"] - 1) % len(styles)], label=run["name"])
    ax.set_xlabel("training tokens")
    ax.set_ylabel("validation loss, FineWeb-Edu val (nats)")
    ax.set_title("GDN versus softmax: validation loss")
    ax.grid(True, alpha=0.3)
    if ax.lines:
        ax.legend()
    fig.tight_layout()
    tmp = path + ".tmp"
    fig.savefig(tmp, format="png")
    os.replace(tmp, path)


def report(out, runs, plan, infos, manifest, throughput, png_name):
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    done = [r for r in runs if r["finished"] and r["eval"]]
    by_model = {m: [r for r in done if r["model"] == m] for m in MODELS}
    models = [m for m in MODELS if any(r["model"] == m for r in runs)]
    L = ["# GDN versus softmax attention: loss at equal tokens", "",
         f"Generated by `scripts/loss_report.py` from `{out}` on {now}. Every number below comes from the run",
         "directories; regenerate with `scripts/loss_comparison.sh --report-only --out DIR`.", ""]

    L += ["## Setup", ""]
    starts = [s["start"] for r in runs for s in r["sittings"] if s.get("start")]
    ends = [s["end"] for r in runs for s in r["sittings"] if s.get("end")]
    L += [f"- Commit: `{plan.get('commit', 'n/a')}`"
          + (" (working tree dirty: uncommitted changes to tracked files)" if plan.get("dirty") else
             " (clean working tree)" if "dirty" in plan else ""),
          f"- GPU: {plan.get('gpu', 'n/a')}, {plan.get('ranks', 'n/a')} data-parallel rank(s)",
          f"- Global batch: {fmt_int(plan.get('global_batch_tokens'))} tokens per step ({plan.get('global_batch', 'n/a')}),"
          " the same for every model",
          f"- Training: {fmt_int(plan.get('tokens'))} tokens asked, {fmt_int(plan.get('steps'))} steps",
          f"- Dates: {min(starts) if starts else 'n/a'} to {max(ends) if ends else 'n/a'}", ""]

    L += ["## Validation loss", "",
          "Final checkpoint of each run, evaluated with `deltatron eval` on each held-out set. Mean over seeds ±",
          "half the range (max − min) / 2 over seeds; a single value where one seed ran. Δ: against softmax_124m's",
          "mean on the same set, in % (negative: lower loss than softmax).", ""]
    head = "| model | seeds | " + " | ".join(f"{label} | Δ" for _, label in SETS) + " |"
    L += [head, "|" + " --- |" * (2 + 2 * len(SETS))]
    means = {}
    for m in models:
        for s, _ in SETS:
            means[(m, s)] = mean_spread([r["eval"]["sets"][s]["val_loss"] for r in by_model[m] if s in r["eval"]["sets"]])
    for m in models:
        cells = [m, ",".join(str(r["seed"]) for r in by_model[m]) or "none finished"]
        for s, _ in SETS:
            mean, spread = means[(m, s)]
            base = means.get(("softmax_124m", s), (None, None))[0]
            cells += [fmt_loss(mean, spread),
                      f"{(mean - base) / base * 100:+.2f}%" if mean is not None and base else "n/a"]
        L.append("| " + " | ".join(cells) + " |")
    batches = sorted({(s, v.get("batches"), v.get("tokens")) for r in done for s, v in r["eval"]["sets"].items()},
                     key=lambda x: [k for k, _ in SETS].index(x[0]) if x[0] in dict(SETS) else 99)
    requested = sorted({r["eval"].get("batches_requested") for r in done})
    L += ["", f"Evaluation batches asked: {', '.join(map(str, requested)) or 'n/a'}; evaluated (fewer where the set"
          " holds fewer): " + "; ".join(f"{s}: {b} batches, {fmt_int(t)} tokens" for s, b, t in batches), ""]

    L += ["## Runs", "",
          "| model | parameters | tokens seen | tokens/s (median of logged steps) | peak GiB | wall time (sum of sittings) |",
          "| --- | --- | --- | --- | --- | --- |"]
    for m in models:
        rs = [r for r in runs if r["model"] == m]
        rates = [r["tokens_per_s"] for r in rs if r["tokens_per_s"]]
        peaks = [r["peak_gib"] for r in rs if r["peak_gib"] is not None]
        L.append(f"| {m} | {fmt_int((infos.get(m) or {}).get('parameters'))} | "
                 + ", ".join(fmt_int(r["tokens"]) for r in rs) + " | "
                 + (f"{statistics.median(rates):,.0f}" if rates else "n/a") + " | "
                 + (f"{max(peaks):.2f}" if peaks else "n/a") + " | "
                 + ", ".join(fmt_time(r["wall_s"]) for r in rs) + " |")
    L.append("")
    L += ["Per run (tokens seen and wall time are listed run by run, seed order):", ""]
    for r in runs:
        state = "finished" if r in done else f"unfinished (step {r['step']})"
        L.append(f"- `{r['name']}`: {state}, {len(r['sittings'])} sitting(s), wall {fmt_time(r['wall_s'])}")
    L += ["", f"![validation loss against tokens]({png_name})", "",
          f"`{png_name}`: the in-training val_loss on the headline set (FineWeb-Edu val) against tokens, one line per"
          " model (colour) and seed (line style).", ""]

    L += ["## Decode memory", "",
          "Bytes kept per sequence while decoding, from `deltatron info CONFIG --json`, beside the published formulas",
          f"(softmax KV cache 2·L·t·d, d = kv heads × head dim; GDN state L·H·d_k·d_v; MLA latent cache",
          f"L·t·(d_c + d_rope)), the formulas at {BYTES_PER_ELEMENT} bytes per element (bf16), without the GDN",
          "convolution state.", "",
          "| model | layers | source | " + " | ".join(n for n, _ in LENGTHS) + " | formula |",
          "|" + " --- |" * (4 + len(LENGTHS))]
    for m in models:
        info = infos.get(m) or {}
        config = next((r["config"] for r in runs if r["model"] == m and r["config"]), None)
        kinds = layer_kinds(info, config)
        mix = ", ".join(f"{kinds.count(k)} {k}" for k in ("attn", "gdn", "mla") if kinds.count(k))
        per_seq = (info.get("decode") or {}).get("bytes_per_sequence") or {}
        L.append(f"| {m} | {mix or 'n/a'} | deltatron info | "
                 + " | ".join(fmt_bytes(per_seq.get(str(t))) for _, t in LENGTHS) + " | |")
        if kinds and config:
            state, cache, text = formula(kinds, config)
            L.append(f"| | | formula | " + " | ".join(fmt_bytes((state + cache * t) * BYTES_PER_ELEMENT)
                                                       for _, t in LENGTHS) + f" | {text} |")
    L.append("")

    L += ["## Corpus", ""]
    if manifest:
        total = find_tokens(manifest)
        L += ["**This is NOT FineWeb-Edu-2.5B.** The models train on the corpus of this manifest"
              + (f" ({fmt_int(total)} tokens)" if total else "") + ", not on 2.5B tokens of FineWeb-Edu: its sources"
              " differ from FineWeb-Edu's web pages, and it is smaller"
              + (f" (the runs see {fmt_int(done[0]['tokens'])} tokens, {done[0]['tokens'] / total:.2f} passes)"
                 if total and done and done[0]["tokens"] else "")
              + ". FineWeb-Edu enters only as the headline held-out set. The manifest, as recorded:", ""]
        L += render_manifest(manifest)
    else:
        L += [f"**No corpus manifest was recorded** (`{out}/corpus_manifest.json`; pass --corpus-manifest). This is",
              "NOT FineWeb-Edu-2.5B.", ""]

    L += ["## Discussion", "", "<!-- MAINTAINER: write the discussion of the results here. -->",
          "**To be written by the maintainer.** (The numbers above are generated; this paragraph is not.)", ""]

    L += ["## Commands", "", "```", plan.get("invocation", "scripts/loss_comparison.sh"), "```", ""]
    for r in runs:
        cmds = [s["command"].strip() for s in r["sittings"] if s.get("command")]
        if r["eval"]:
            for s, v in r["eval"]["sets"].items():
                ckpt = v.get("checkpoint", r["eval"].get("checkpoint"))
                cmds.append(f"deltatron eval --checkpoint {ckpt} --data '{v.get('data')}' "
                            f"--batches {r['eval'].get('batches_requested')} --json")
        if cmds:
            L += [f"`{r['name']}`:", "", "```"] + cmds + ["```", ""]

    L += full_scale(runs, plan, throughput, models)
    return "\n".join(L)


def full_scale(runs, plan, throughput, models):
    """The 2.5B-token recipe on 8 GPUs and its estimated wall time, from measured tokens/s."""
    ranks = plan.get("ranks") or 1
    measured = (throughput or {}).get("measured", {})
    per_gpu = {}
    for m in models:
        rates = [r["tokens_per_s"] for r in runs if r["model"] == m and r["tokens_per_s"]]
        if rates:
            per_gpu[m] = (statistics.median(rates) / ranks, "these runs' median")
        elif m in measured:
            per_gpu[m] = (measured[m]["tokens_per_s"], measured[m].get("source", "throughput.json"))
    slowest = min((v for v, _ in per_gpu.values()), default=None)
    L = ["## Full-scale recipe", "",
         "2.5B tokens of FineWeb-Edu per run on 8 GPUs (data parallelism through mpirun, each model on all 8):", "",
         "```",
         "python3 scripts/prepare_fineweb_edu.py --name sample-10BT --max-docs 2700000 --val-docs 10000 \\",
         "    --shard-name corpus --out shards/fineweb_edu_2p5B   # about 1K tokens a document: check the total",
         "mv shards/fineweb_edu_2p5B/corpus_val_000000.bin shards/fineweb_edu_2p5B/fineweb_edu_val_000000.bin",
         "cp shards/comparison/fineweb_val_000000.bin shards/comparison/docs_val_000000.bin shards/fineweb_edu_2p5B/",
         "scripts/loss_comparison.sh --tokens 2.5B --gpus 8 --data shards/fineweb_edu_2p5B \\",
         "    --out runs/loss_comparison_2p5B --report docs/experiments/loss_comparison_2p5B.md",
         "```", "",
         f"Estimated wall time at {FULL_GPUS}× the per-GPU tokens/s (ideal scaling), {OVERHEAD_S} s per run for"
         " start-up and evaluation:", "",
         "| model | runs | tokens/s per GPU | source | per run | all runs |", "| --- | --- | --- | --- | --- | --- |"]
    total = 0
    for m in models:
        n = len({r["seed"] for r in runs if r["model"] == m})
        rate, src = per_gpu.get(m, (slowest, "unknown: the slowest known rate"))
        if not rate:
            L.append(f"| {m} | {n} | n/a | unknown | n/a | n/a |")
            continue
        each = FULL_TOKENS / (rate * FULL_GPUS) + OVERHEAD_S
        total += each * n
        L.append(f"| {m} | {n} | {rate:,.0f} | {src} | {fmt_time(each)} | {fmt_time(each * n)} |")
    L += ["", f"Total: {fmt_time(total)}.", ""]
    return L


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="the comparison's run directories (loss_comparison.sh --out)")
    ap.add_argument("--report", default="docs/experiments/loss_comparison.md", help="the Markdown report")
    ap.add_argument("--throughput", default="configs/experiments/throughput.json", help="measured tokens/s")
    args = ap.parse_args()
    if not os.path.isdir(args.out):
        fail(f"--out {args.out} is not a directory; pass the --out of scripts/loss_comparison.sh")
    runs = find_runs(args.out)
    if not runs:
        fail(f"{args.out} holds no run directory (<model>_s<seed>/ with model one of {', '.join(MODELS)})")
    plan = load_json(os.path.join(args.out, "plan.json"), {})
    infos = {m: load_json(os.path.join(args.out, "info", m + ".json")) for m in MODELS}
    manifest = load_json(os.path.join(args.out, "corpus_manifest.json"))
    throughput = load_json(args.throughput, {})
    os.makedirs(os.path.dirname(os.path.abspath(args.report)), exist_ok=True)
    png = os.path.splitext(args.report)[0] + ".png"
    plot(runs, png)
    text = report(args.out, runs, plan, infos, manifest, throughput, os.path.basename(png))
    tmp = args.report + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, args.report)
    print(f"loss_report: wrote {args.report} and {png}")


if __name__ == "__main__":
    main()
