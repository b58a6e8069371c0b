#!/usr/bin/env python3
"""The report of the GDN-versus-softmax loss comparison, from the run directories that
scripts/loss_comparison.sh writes (every number in it comes from those files).

    scripts/loss_report.py --out runs/loss_comparison --report docs/experiments/loss_comparison.md

Reads OUT/plan.json (the sitting's setup), OUT/<model>_s<seed>/ (config.yaml, metrics.jsonl, eval.json,
sittings.jsonl, finished.json), OUT/info/<model>.json (`deltatron info CONFIG --json`; with --deltatron,
run on the --configs file of a model that has none), OUT/corpus_manifest.json (or --manifest) and the
maintainer's discussion (--discussion, default <report>_discussion.md beside the report); writes the
Markdown report and, beside it, a PNG of the validation loss against tokens (the in-training val_loss
on the headline set). Paths under the repository are shown relative to its root.
"""
import argparse
import datetime
import json
import os
import re
import shlex
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_metrics import read_metrics  # noqa: E402  (scripts/plot_metrics.py)

MODELS = ["softmax_124m", "gdn_124m", "hybrid_gqa_124m", "hybrid_mla_124m"]
# The default plan of scripts/loss_comparison.sh: two seeds of the pure models, one of the hybrids.
DEFAULT_SEEDS = {"softmax_124m": [1, 2], "gdn_124m": [1, 2], "hybrid_gqa_124m": [1], "hybrid_mla_124m": [1]}
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETS = [("fineweb_edu", "FineWeb-Edu val (headline)"), ("fineweb", "FineWeb val"), ("docs", "docs val")]
LENGTHS = [("1K", 1024), ("8K", 8192), ("32K", 32768), ("128K", 131072)]
# Element sizes of the decode memory, as `deltatron info` counts it: the GDN recurrent state in fp32,
# its short-convolution tail and the KV and MLA latent caches in bf16.
STATE_BYTES = 4
CACHE_BYTES = 2
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
    """The published decode memory in bytes, at deltatron's element sizes: (state per sequence, cache per
    token, text), and the GDN short-convolution tail that the published formulas leave out: (bytes, text)."""
    model = (config or {}).get("model") or {}
    attn, gdn, mla = model.get("attn") or {}, model.get("gdn") or {}, model.get("mla") or {}
    n = {k: kinds.count(k) for k in ("attn", "gdn", "mla")}
    state = cache = 0
    text, tail = [], (0, "")
    if n["attn"]:
        d = attn.get("n_kv_heads", 12) * attn.get("head_dim", 64)
        cache += 2 * n["attn"] * d * CACHE_BYTES
        text.append(f"2·L·t·d = 2·{n['attn']}·t·{d} (×{CACHE_BYTES} B)")
    if n["gdn"]:
        h, dk, dv = gdn.get("n_v_heads", 12), gdn.get("head_k_dim", 64), gdn.get("head_v_dim", 64)
        hk, k = gdn.get("n_k_heads", h), gdn.get("conv_kernel", 4)
        state += n["gdn"] * h * dk * dv * STATE_BYTES
        text.append(f"L·H·d_k·d_v = {n['gdn']}·{h}·{dk}·{dv} (×{STATE_BYTES} B)")
        channels = 2 * hk * dk + h * dv
        tail = (n["gdn"] * (k - 1) * channels * CACHE_BYTES,
                f"conv tail L·(k−1)·(2·H_k·d_k + H·d_v) = {n['gdn']}·{k - 1}·{channels} (×{CACHE_BYTES} B)")
    if n["mla"]:
        c = mla.get("kv_lora_rank", 256) + mla.get("qk_rope_head_dim", 32)
        cache += n["mla"] * c * CACHE_BYTES
        text.append(f"L·t·(d_c + d_rope) = {n['mla']}·t·{c} (×{CACHE_BYTES} B)")
    return state, cache, " + ".join(text) or "n/a", tail


class Paths:
    """Shows paths relative to the repository root: the root of this checkout and the one the runs
    recorded (plan.json's configs directory) are cut off, and any deltatron binary becomes
    build/deltatron."""

    def __init__(self, plan):
        roots = {REPO}
        configs = plan.get("configs") or ""
        if configs.rstrip("/").endswith("configs/experiments"):
            roots.add(os.path.dirname(os.path.dirname(configs.rstrip("/"))))
        self.roots = sorted((r.rstrip("/") for r in roots if r and r != "/"), key=len, reverse=True)

    def __call__(self, text):
        text = str(text)
        for root in self.roots:
            text = re.sub(r"(?<![\w./-])" + re.escape(root) + "(/|(?=[\\s'\"]|$))",
                          lambda m: "" if m.group(1) else ".", text)
        # a binary path (/tmp/xbin/deltatron, build-gdncu/deltatron) or a bare `deltatron` command word
        text = re.sub(r"(?<![\w./-])(?:[\w.-]+/|/)*deltatron(?![\w./-])", "build/deltatron", text)
        return text.replace("--build/deltatron", "--deltatron")

    def file(self, path):
        """A file path relative to the repository root where it lies inside it."""
        full = os.path.abspath(path)
        return os.path.relpath(full, REPO) if full.startswith(REPO + os.sep) else path


def share(part, whole):
    return f"{part / whole * 100:.1f}%" if whole else "n/a"


def corpus_section(manifest, runs, manifest_path, report_path):
    """The corpus in brief, from its manifest: what it is, the splits, the training tokens by source,
    the packages and the cleaning rules."""
    outputs = manifest.get("outputs") or {}
    train = outputs.get("train.jsonl") or {}
    total = (train.get("total") or {}).get("tokens")
    by_source = train.get("by_source") or {}
    debian = {k: v for k, v in by_source.items() if k.startswith("debian:")}
    deb_tokens = sum(v.get("tokens", 0) for v in debian.values())
    web = {k: v for k, v in by_source.items() if not k.startswith("debian:")}
    seen = next((r["tokens"] for r in runs if r["finished"] and r["tokens"]), None)
    edu = (outputs.get("val_fineweb_edu.jsonl") or {}).get("total") or {}
    fw_input = ((manifest.get("inputs") or {}).get("fineweb") or {}).get("path", "")
    report_dir = os.path.dirname(os.path.abspath(report_path))
    link = (os.path.relpath(os.path.join(REPO, "docs", "corpus.md"), report_dir)
            if (report_dir + os.sep).startswith(REPO + os.sep) else "docs/corpus.md")

    L = []
    if total:
        web_words = ", ".join(f"{fmt_int(v.get('tokens'))} tokens of "
                              + ("a legal-leaning FineWeb subset" if k == "fineweb" and "legal" in fw_input
                                 else "FineWeb" if k == "fineweb" else k)
                              + (f" (`{fw_input}`)" if k == "fineweb" and fw_input else "")
                              for k, v in sorted(web.items(), key=lambda kv: -kv[1].get("tokens", 0)))
        text = (f"**This is not FineWeb-Edu-2.5B.** The models train on an offline corpus of {fmt_int(total)} tokens"
                f" ({total / 1e6:.1f}M): {share(deb_tokens, total)} Debian technical documentation"
                f" ({len(debian)} packages, {fmt_int(deb_tokens)} tokens)"
                + (f" and {web_words}" if web_words else "") + ".")
        if edu.get("tokens"):
            text += (f" FineWeb-Edu is not trained on: it is only the headline held-out set"
                     f" ({fmt_int(edu.get('documents'))} documents, {fmt_int(edu.get('tokens'))} tokens).")
        if seen:
            text += (f" At {fmt_int(seen)} tokens a run sees the training corpus {seen / total:.2f} times"
                     f" (tokens seen / training tokens), so most of its text is seen twice.")
        L += [text, ""]
    else:
        L += ["**This is not FineWeb-Edu-2.5B.** The manifest gives no training token count (`outputs`).", ""]
    L += [f"How it is built, and why: [docs/corpus.md]({link}). Manifest: `{manifest_path}`.", ""]

    if outputs:
        L += ["| split | use | documents | tokens | SHA-256 |", "| --- | --- | --- | --- | --- |"]
        for name, v in outputs.items():
            use = ("training" if name.startswith("train") else
                   "held-out (headline)" if "fineweb_edu" in name else "held-out")
            t = v.get("total") or {}
            L.append(f"| `{name}` | {use} | {fmt_int(t.get('documents'))} | {fmt_int(t.get('tokens'))} | "
                     f"`{v.get('sha256', 'n/a')}` |")
        L.append("")

    if by_source and total:
        rows = sorted(by_source.items(), key=lambda kv: -kv[1].get("tokens", 0))
        big = [(k, v) for k, v in rows if v.get("tokens", 0) >= 0.01 * total]
        small = [(k, v) for k, v in rows if v.get("tokens", 0) < 0.01 * total]
        L += ["Training tokens by source (sources under 1% together):", "",
              "| source | documents | tokens | share |", "| --- | --- | --- | --- |"]
        for k, v in big:
            name = (k[len("debian:"):] if k.startswith("debian:") else
                    "FineWeb (legal-leaning subset)" if k == "fineweb" and "legal" in fw_input else k)
            L.append(f"| {name} | {fmt_int(v.get('documents'))} | {fmt_int(v.get('tokens'))} | "
                     f"{share(v.get('tokens', 0), total)} |")
        if small:
            docs = sum(v.get("documents", 0) for _, v in small)
            toks = sum(v.get("tokens", 0) for _, v in small)
            L.append(f"| other ({len(small)} {'packages' if all(k.startswith('debian:') for k, _ in small) else 'sources'})"
                     f" | {fmt_int(docs)} | {fmt_int(toks)} | {share(toks, total)} |")
        L.append("")

    packages = [p for p in manifest.get("packages") or [] if isinstance(p, dict) and p.get("package")]
    if packages:
        L += [f"Debian packages ({len(packages)}, package=version; the `.deb` SHA-256s are in the manifest): "
              + ", ".join(f"{p['package']}={p.get('version', '?')}" for p in packages) + ".", ""]

    # the manifest's text in Markdown: a literal "<pre>" would open an HTML block
    cleaning = {k: v.replace("<", "&lt;") if isinstance(v, str) else v for k, v in (manifest.get("cleaning") or {}).items()}
    removed = cleaning.get("removed") or {}

    def count(key):
        return fmt_int(removed[key]) if isinstance(removed.get(key), int) else "n/a"
    bullets = []
    if cleaning.get("selection"):
        conv = "; ".join(f"{label} by {cleaning[k]}" for k, label in (("html", "HTML"), ("man", "man pages"),
                                                                        ("pod", "POD")) if cleaning.get(k))
        bullets.append(f"- Pages: {cleaning['selection']}." + (f" Text: {conv}." if conv else ""))
    if cleaning.get("repeated_lines"):
        bullets.append(f"- Boilerplate: {cleaning['repeated_lines']} ({count('repeated_lines')} lines,"
                       f" {count('repeated_line_chars')} characters).")
    if cleaning.get("page_filters"):
        bullets.append(f"- Page filters: {cleaning['page_filters']} ({count('pages_too_short')} pages too short,"
                       f" {count('pages_not_english')} not English).")
    if cleaning.get("dedup"):
        bullets.append(f"- Deduplication: {cleaning['dedup']} ({count('pages_exact_duplicates')} exact and"
                       f" {count('pages_near_duplicates')} near duplicates dropped).")
    if bullets:
        L += ["Cleaning of the documentation pages:", ""] + bullets + [""]
    return L


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


def completion_command(plan, paths):
    """The recorded invocation without --models, --seeds and --time-limit (so that it covers the default
    plan) and without --deltatron and --corpus-manifest (build/deltatron is the default, and the
    manifest is already in the output directory)."""
    try:
        words = shlex.split(plan.get("invocation") or "scripts/loss_comparison.sh")
    except ValueError:
        words = ["scripts/loss_comparison.sh"]
    keep, i = [words[0] if words else "scripts/loss_comparison.sh"], 1
    while i < len(words):
        w = words[i]
        if w in ("--models", "--seeds", "--time-limit", "--deltatron", "--corpus-manifest"):
            i += 2
            continue
        if w not in ("--dry-run", "--report-only"):
            keep.append(w)
        i += 1
    if "--out" not in keep:
        keep += ["--out", "runs/loss_comparison"]
    return paths(" ".join(shlex.quote(w) if i else w for i, w in enumerate(keep)))


def commit_line(runs, plan):
    """The commits that trained the runs, from their sittings (the plan's for a sitting that records
    none): one commit, or each with the runs it trained; dirty where its working tree was."""
    by_commit = {}
    for r in runs:
        for s in r["sittings"]:
            commit = s.get("commit") or plan.get("commit", "n/a")
            entry = by_commit.setdefault(commit, {"runs": [], "dirty": False})
            if r["name"] not in entry["runs"]:
                entry["runs"].append(r["name"])
            entry["dirty"] |= bool(s.get("dirty", plan.get("dirty")) if s.get("commit") else plan.get("dirty"))
    if not by_commit:
        by_commit = {plan.get("commit", "n/a"): {"runs": [], "dirty": bool(plan.get("dirty"))}}
    state = lambda e: " (working tree dirty: uncommitted changes to tracked files)" if e["dirty"] else ""
    if len(by_commit) == 1:
        (commit, entry), = by_commit.items()
        return f"- Commit: `{commit}`{state(entry)}"
    parts = [f"`{c}` ({', '.join(e['runs'])}){state(e)}" for c, e in by_commit.items()]
    return "- Commits: " + "; ".join(parts)


def report(out, runs, plan, infos, configs, manifest, manifest_path, discussion, throughput, report_path,
           png_name):
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    paths = Paths(plan)
    shown_out = paths.file(out)
    done = [r for r in runs if r["finished"] and r["eval"]]
    by_model = {m: [r for r in done if r["model"] == m] for m in MODELS}
    models = [m for m in MODELS if any(r["model"] == m for r in runs)]
    planned = [f"{m}_s{s}" for m in MODELS for s in DEFAULT_SEEDS[m]]
    finished = {r["name"] for r in done}
    missing = [n for n in planned if n not in finished]
    L = ["# GDN versus softmax attention: loss at equal tokens", "",
         f"Generated by `scripts/loss_report.py` from `{shown_out}` on {now}. Every number below comes from the run",
         f"directories; regenerate with `scripts/loss_comparison.sh --report-only --out {shown_out}`.", ""]

    L += ["## Setup", ""]
    starts = [s["start"] for r in runs for s in r["sittings"] if s.get("start")]
    ends = [s["end"] for r in runs for s in r["sittings"] if s.get("end")]
    L += [commit_line(runs, plan),
          f"- GPU: {plan.get('gpu', 'n/a')}, {plan.get('ranks', 'n/a')} data-parallel rank(s)",
          f"- Global batch: {fmt_int(plan.get('global_batch_tokens'))} tokens per step ({plan.get('global_batch', 'n/a')}),"
          " the same for every model",
          f"- Training: {fmt_int(plan.get('tokens'))} tokens asked, {fmt_int(plan.get('steps'))} steps",
          f"- Dates: {min(starts) if starts else 'n/a'} to {max(ends) if ends else 'n/a'}",
          f"- Runs finished: {len(finished & set(planned))} of the {len(planned)} of the default plan"
          + (f"; still missing: {', '.join(f'`{n}`' for n in missing)} (see below)" if missing else ""), ""]

    L += ["## Validation loss", "",
          "Final checkpoint of each run, evaluated with `deltatron eval` on each held-out set. Mean over seeds ±",
          "half the range (max − min) / 2 over seeds; a single value where one seed ran. Δ: against softmax_124m's",
          "mean on the same set, in % (negative: lower loss than softmax).", ""]
    head = "| model | seeds | " + " | ".join(f"{label} | Δ" for _, label in SETS) + " |"
    L += [head, "|" + " --- |" * (2 + 2 * len(SETS))]
    means = {}
    for m in MODELS:
        for s, _ in SETS:
            means[(m, s)] = mean_spread([r["eval"]["sets"][s]["val_loss"] for r in by_model[m] if s in r["eval"]["sets"]])
    for m in MODELS:
        if not by_model[m]:
            started = [r for r in runs if r["model"] == m]
            state = (f"not finished yet (step {max(r['step'] for r in started):,})" if started else "not run yet")
            L.append(f"| {m} | {state} | " + " | ".join("–" for _ in range(2 * len(SETS))) + " |")
            continue
        cells = [m, ",".join(str(r["seed"]) for r in by_model[m])]
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
    if missing:
        L += [f"**Runs still missing.** The default plan is softmax_124m and gdn_124m with seeds 1 and 2 and the"
              f" hybrids with seed 1 ({len(planned)} runs); {len(missing)} of them have not finished:"
              f" {', '.join(f'`{n}`' for n in missing)}. This command completes them: it skips the finished"
              " runs (`<run>/finished.json`), resumes an unfinished one from its newest checkpoint, and needs"
              " the finished runs' directories in its `--out`:", "",
              "```", completion_command(plan, paths), "```", "",
              "With `--time-limit S` it stops before a run that no longer fits (exit 3); the same command"
              " continues later. On a GPU host that receives a copy of the working tree, pass the same options to"
              " `tools/dev/loss_comparison_remote.sh`, which adds `--deltatron`, `--corpus-manifest` and `--out`.", ""]
    else:
        L += [f"Every run of the default plan ({len(planned)} runs) has finished.", ""]

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
    for m in MODELS:
        if m not in models:
            L.append(f"| {m} | {fmt_int((infos.get(m) or {}).get('parameters'))} | not run yet | | | |")
    L.append("")
    L += ["Per run (tokens seen and wall time are listed run by run, seed order):", ""]
    for r in runs:
        state = "finished" if r in done else f"unfinished (step {r['step']})"
        L.append(f"- `{r['name']}`: {state}, {len(r['sittings'])} sitting(s), wall {fmt_time(r['wall_s'])}")
    L += ["", f"![validation loss against tokens]({png_name})", "",
          f"`{png_name}`: the in-training val_loss on the headline set (FineWeb-Edu val) against tokens, one line per"
          " model (colour) and seed (line style).", ""]

    L += ["## Decode memory", "",
          "Bytes kept per sequence while decoding, for every model of the comparison (run or not), from",
          "`deltatron info CONFIG --json`, beside the published formulas: softmax KV cache 2·L·t·d (d = kv heads ×",
          "head dim), GDN state L·H·d_k·d_v, MLA latent cache L·t·(d_c + d_rope). The formulas use the element",
          f"sizes that deltatron counts: the GDN state in fp32 ({STATE_BYTES} B), the KV and latent caches in bf16"
          f" ({CACHE_BYTES} B).",
          "Where they agree the rows are equal; for a model with GDN layers the remaining difference is the",
          "short convolution's last k − 1 inputs of the q, k and v channels (bf16), which the published",
          "formula leaves out and the `info − formula` row gives. Last column but one: the 32K value as a",
          "share of softmax_124m's (the same source).", "",
          "| model | layers | source | " + " | ".join(n for n, _ in LENGTHS) + " | % of softmax at 32K | formula |",
          "|" + " --- |" * (5 + len(LENGTHS))]
    t32 = dict(LENGTHS)["32K"]
    rows = {}
    for m in MODELS:
        info = infos.get(m) or {}
        config = next((r["config"] for r in runs if r["model"] == m and r["config"]), None) or configs.get(m)
        kinds = layer_kinds(info, config)
        per_seq = (info.get("decode") or {}).get("bytes_per_sequence") or {}
        info_bytes = {t: per_seq.get(str(t)) for _, t in LENGTHS}
        form = formula(kinds, config) if kinds and config else None
        rows[m] = (kinds, info_bytes, form)

    def pct(value, base):
        return f"{value / base * 100:.1f}%" if value is not None and base else "n/a"
    soft_info = rows["softmax_124m"][1][t32]
    soft_form = rows["softmax_124m"][2]
    soft_form32 = soft_form[0] + soft_form[1] * t32 if soft_form else None
    for m in MODELS:
        kinds, info_bytes, form = rows[m]
        mix = ", ".join(f"{kinds.count(k)} {k}" for k in ("attn", "gdn", "mla") if kinds.count(k))
        L.append(f"| {m} | {mix or 'n/a'} | deltatron info | "
                 + " | ".join(fmt_bytes(info_bytes[t]) for _, t in LENGTHS)
                 + f" | {pct(info_bytes[t32], soft_info)} | |")
        if form:
            state, cache, text, (tail, tail_text) = form
            values = {t: state + cache * t for _, t in LENGTHS}
            L.append("| | | formula | " + " | ".join(fmt_bytes(values[t]) for _, t in LENGTHS)
                     + f" | {pct(values[t32], soft_form32)} | {text} |")
            diffs = {info_bytes[t] - values[t] for _, t in LENGTHS if info_bytes[t] is not None}
            if tail or diffs - {0}:
                if len(diffs) == 1 and diffs == {tail}:
                    note = f"{tail_text}: the same"
                elif diffs:
                    note = f"differs from the {tail_text} = {fmt_bytes(tail)}"
                else:
                    note = f"{tail_text} (no deltatron info to compare)"
                L.append("| | | info − formula | " + " | ".join(
                    fmt_bytes(info_bytes[t] - values[t]) if info_bytes[t] is not None else "n/a" for _, t in LENGTHS)
                    + f" | | {note} |")
    L.append("")

    L += ["## Corpus", ""]
    if manifest:
        L += corpus_section(manifest, runs, paths.file(manifest_path), report_path)
    else:
        L += [f"**No corpus manifest was recorded** (`{shown_out}/corpus_manifest.json`; pass --corpus-manifest). This is",
              "not FineWeb-Edu-2.5B.", ""]

    L += ["## Discussion", ""]
    shown, text = discussion
    if text and text.strip():
        L += [text.strip(), "", f"(The maintainer's text, from `{shown}`; the numbers above are generated.)", ""]
    else:
        L += [f"No discussion has been written yet: the report inserts `{shown}` here once it exists.", ""]

    L += ["## Commands", "", "The recorded invocation of the last sitting (paths relative to the repository root, the"
          " binary as `build/deltatron`):", "", "```", paths(plan.get("invocation", "scripts/loss_comparison.sh")),
          "```", ""]
    try:
        words = shlex.split(plan.get("invocation") or "")
    except ValueError:
        words = []
    given = words[words.index("--corpus-manifest") + 1] if "--corpus-manifest" in words[:-1] else None
    if given and os.path.isabs(paths(given)):
        L += [f"`{given}` lay outside the repository on the host that ran it; the sitting copied it into its"
              f" `--out`, kept here as `{shown_out}/corpus_manifest.json`.", ""]
    for r in runs:
        cmds = [paths(s["command"].strip()) for s in r["sittings"] if s.get("command")]
        if r["eval"]:
            for s, v in r["eval"]["sets"].items():
                ckpt = v.get("checkpoint", r["eval"].get("checkpoint"))
                cmds.append(paths(f"deltatron eval --checkpoint {ckpt} --data '{v.get('data')}' "
                                  f"--batches {r['eval'].get('batches_requested')} --json"))
        if cmds:
            L += [f"`{r['name']}`:", "", "```"] + cmds + ["```", ""]

    L += full_scale(runs, plan, throughput, MODELS)
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
         f"Estimated wall time of the default plan's runs (and any other seed run here) at {FULL_GPUS}× the"
         f" per-GPU tokens/s (ideal scaling), {OVERHEAD_S} s per run for start-up and evaluation:", "",
         "| model | runs | tokens/s per GPU | source | per run | all runs |", "| --- | --- | --- | --- | --- | --- |"]
    total = 0
    for m in models:
        n = len({r["seed"] for r in runs if r["model"] == m} | set(DEFAULT_SEEDS[m]))
        rate, src = per_gpu.get(m, (slowest, "unknown: the slowest known rate"))
        if not rate:
            L.append(f"| {m} | {n} | n/a | unknown | n/a | n/a |")
            continue
        each = FULL_TOKENS / (rate * FULL_GPUS) + OVERHEAD_S
        total += each * n
        L.append(f"| {m} | {n} | {rate:,.0f} | {src} | {fmt_time(each)} | {fmt_time(each * n)} |")
    L += ["", f"Total: {fmt_time(total)}.", ""]
    return L


def read_info(out, model, configs_dir, deltatron):
    """OUT/info/<model>.json, else `deltatron info CONFIG --json` on the model's config where a binary is
    given, else None."""
    info = load_json(os.path.join(out, "info", model + ".json"))
    config = os.path.join(configs_dir, model + ".yaml")
    if info is None and deltatron and os.path.isfile(config):
        try:
            res = subprocess.run([deltatron, "info", config, "--json"], capture_output=True, text=True, timeout=120)
            if res.returncode == 0:
                info = json.loads(res.stdout)
            else:
                print(f"loss_report: warning: '{deltatron} info {config} --json' failed: {res.stderr.strip()[-200:]}",
                      file=sys.stderr)
        except (OSError, ValueError, subprocess.TimeoutExpired) as e:
            print(f"loss_report: warning: '{deltatron} info {config} --json': {e}", file=sys.stderr)
    return info


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="the comparison's run directories (loss_comparison.sh --out)")
    ap.add_argument("--report", default="docs/experiments/loss_comparison.md", help="the Markdown report")
    ap.add_argument("--throughput", default="configs/experiments/throughput.json", help="measured tokens/s")
    ap.add_argument("--configs", default=os.path.join(REPO, "configs", "experiments"),
                    help="the model configs, DIR/<model>.yaml: layers of the models without a run")
    ap.add_argument("--deltatron", help="a deltatron binary for `info CONFIG --json` of models without OUT/info/")
    ap.add_argument("--manifest", help="the corpus manifest (default OUT/corpus_manifest.json)")
    ap.add_argument("--discussion", help="the maintainer's discussion, inserted as it is where it exists"
                    " (default: <report>_discussion.md beside the report)")
    args = ap.parse_args()
    if not os.path.isdir(args.out):
        fail(f"--out {args.out} is not a directory; pass the --out of scripts/loss_comparison.sh")
    runs = find_runs(args.out)
    if not runs:
        fail(f"{args.out} holds no run directory (<model>_s<seed>/ with model one of {', '.join(MODELS)})")
    plan = load_json(os.path.join(args.out, "plan.json"), {})
    infos = {m: read_info(args.out, m, args.configs, args.deltatron) for m in MODELS}
    configs = {m: load_yaml(os.path.join(args.configs, m + ".yaml")) for m in MODELS}
    manifest_path = args.manifest or os.path.join(args.out, "corpus_manifest.json")
    if args.manifest and not os.path.isfile(args.manifest):
        fail(f"--manifest {args.manifest} does not exist")
    manifest = load_json(manifest_path)
    discussion_path = args.discussion or os.path.splitext(args.report)[0] + "_discussion.md"
    discussion_text = None
    if os.path.isfile(discussion_path):
        with open(discussion_path) as f:
            discussion_text = f.read()
    elif args.discussion:
        print(f"loss_report: warning: --discussion {args.discussion} does not exist; the report says so", file=sys.stderr)
    throughput = load_json(args.throughput, {})
    os.makedirs(os.path.dirname(os.path.abspath(args.report)), exist_ok=True)
    png = os.path.splitext(args.report)[0] + ".png"
    plot(runs, png)
    text = report(args.out, runs, plan, infos, configs, manifest, manifest_path,
                  (Paths(plan).file(discussion_path), discussion_text), throughput, args.report, os.path.basename(png))
    tmp = args.report + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, args.report)
    print(f"loss_report: wrote {args.report} and {png}")


if __name__ == "__main__":
    main()
