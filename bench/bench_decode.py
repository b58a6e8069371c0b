#!/usr/bin/env python3
"""Decode throughput and memory of `deltatron generate` against context length and batch, with
transformers' `generate` on the Hugging Face export of the same checkpoint as the peer, in one run.

    python3 bench/bench_decode.py --deltatron build/deltatron [--device cuda] \\
        [--configs configs/experiments/hybrid_gqa_124m.yaml,...] [--contexts 1024,8192,32768,131072] \\
        [--batches 1,64] [--new-tokens 128] [--no-peer] [--work DIR] [--json OUT.json]

For each config: a checkpoint from one training step on the bundled FineWeb-Edu sample (weights do
not change the speed), its export (`deltatron export --format hf`; models the export refuses, such
as MLA, have no peer), then for each context and batch:
- deltatron: `generate --ignore-eos --temperature 0 --max-new-tokens G --batch N --json` on a prompt
  of about `context` tokens of FineWeb-Edu text: prefill ms, decode tokens/s (all sequences, over the
  steps after steps 1 to 9: the first two build the GEMM plans and record the CUDA graph, and greedy
  steps 2 to 9 run as one graph; the rate over all steps is in the JSON as all_steps_tokens_per_s),
  the decode state's allocation, and on the GPU the device memory the decode holds: the larger of the
  device's used memory after the prefill and after the last step (the recorded step graph
  included), minus before the state (measured with the driver; it includes the allocator's
  granularity);
- transformers (float32 on the CPU, bf16 on the GPU, the model's own caches): the same prompt ids
  repeated N times, prefill time (a forward with use_cache), decode tokens/s from generate with G
  new tokens minus generate with 1, and the cache's memory: on the GPU torch.cuda.memory_allocated
  after the prefill minus before it, on the CPU the bytes of the tensors the cache object holds.
A config given as PATH@fp8 is the same model (the same checkpoint) decoded with `--mla-cache fp8`,
the MLA latent cache in fp8 (docs/inference.md); its rows are labelled `NAME (fp8 cache)` and have
no peer (transformers' cache is the bf16 row's). The default configs include hybrid_mla_124m@fp8.
A run that fails (out of memory, a limit) is reported with its error and the table goes on.
Prints a table and writes JSON (--json, default $OUT/bench_decode.json or ./bench_decode.json).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_CONFIGS = ",".join(f"configs/experiments/{m}_124m.yaml" for m in ("hybrid_gqa", "gdn", "hybrid_mla", "softmax"))
DEFAULT_CONFIGS += ",configs/experiments/hybrid_mla_124m.yaml@fp8"
# A config's variants: PATH@VARIANT -> extra `generate` arguments and the label's suffix.
VARIANTS = {"fp8": (["--mla-cache", "fp8"], " (fp8 cache)")}


def parse_config(spec):
    """'PATH' or 'PATH@VARIANT' -> (path, generate arguments, label suffix); None for an unknown variant."""
    path, _, variant = spec.partition("@")
    if not variant:
        return path, [], ""
    if variant not in VARIANTS:
        return None
    return (path,) + VARIANTS[variant]


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def prepare_data(args, work):
    shards = os.path.join(work, "shards")
    if not os.path.exists(os.path.join(shards, "fineweb_edu.manifest.json")):
        r = run([args.deltatron, "prepare", "--input", os.path.join(REPO, "assets/fineweb-edu/fineweb_edu.jsonl"),
                 "--out", shards, "--overwrite"])
        if r.returncode:
            sys.exit(f"bench_decode: prepare failed: {r.stderr.strip()}")
    return shards


def checkpoint(args, work, shards, config):
    name = os.path.splitext(os.path.basename(config))[0]
    run_dir = os.path.join(work, "runs", name)
    ckpt = os.path.join(run_dir, "checkpoints", "step_00000001.h5")
    if not os.path.exists(ckpt):
        r = run([args.deltatron, "train", "--config", config, "--run-dir", run_dir, "--device", args.device,
                 "--set", "train.steps=1", "--set", "train.warmup_steps=0", "--set", "train.checkpoint_every=1",
                 "--set", "train.eval_every=0",
                 "--set", "train.grad_accum=1", "--set", "train.batch_size=1", "--set", "train.seq_len=128",
                 "--set", f"data.train={shards}/fineweb_edu_train_*.bin",
                 "--set", f"data.val={shards}/fineweb_edu_val_*.bin"])
        if r.returncode:
            sys.exit(f"bench_decode: training {name} for its checkpoint failed: {r.stderr.strip()[-800:]}")
    return name, ckpt


def export(args, work, name, ckpt):
    out = os.path.join(work, "hf", name)
    if os.path.exists(os.path.join(out, "model.safetensors")):
        return out, None
    os.makedirs(os.path.dirname(out), exist_ok=True)
    dtype = "bf16" if args.device == "cuda" else "fp32"
    r = run([args.deltatron, "export", "--format", "hf", "--checkpoint", ckpt, "--out", out, "--dtype", dtype])
    if r.returncode:
        return None, r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "export failed"
    return out, None


def prompt_file(args, work, context):
    """A text of about `context` tokens: FineWeb-Edu documents, repeated, cut at `context` ids."""
    path = os.path.join(work, f"prompt_{context}.txt")
    if os.path.exists(path):
        return path
    with open(os.path.join(REPO, "assets/fineweb-edu/fineweb_edu.jsonl")) as f:
        text = "\n\n".join(json.loads(line)["text"] for line in f if line.strip())
    ids = run([args.deltatron, "tokenize"], input=text).stdout.split()
    reps = -(-context // max(len(ids), 1))
    ids = (ids * reps)[:context]
    r = run([args.deltatron, "detokenize"], input=" ".join(ids))
    with open(path, "w") as f:
        f.write(r.stdout)
    return path


def deltatron_decode(args, ckpt, prompt, batch, extra=()):
    cmd = [args.deltatron, "generate", "--checkpoint", ckpt, "--prompt-file", prompt, "--ignore-eos",
           "--temperature", "0", "--max-new-tokens", str(args.new_tokens), "--batch", str(batch),
           "--max-context", str(10 ** 7), "--device", args.device, "--json", *extra]
    r = run(cmd)
    if r.returncode:
        last = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"
        # The message without the source location (an absolute path on the machine that built it).
        return {"error": re.sub(r" at /\S+:\d+$", "", last)}
    j = json.loads(r.stdout)
    mem = j.get("memory", {})
    used = max(mem.get("device_used_after_prefill_bytes", 0),
               mem.get("device_used_after_decode_bytes", 0)) - mem.get("device_used_before_bytes", 0)
    return {"prompt_tokens": len(j["prompt"]["tokens"]), "prompt_ids": j["prompt"]["tokens"],
            "mla_cache": j["options"].get("mla_cache"),
            "prefill_ms": j["timing"]["prefill_ms"],
            # The steps after steps 1 to 9 (GEMM plans, then the CUDA graph's recording): the rate of a
            # long generation, as the peer's (generate of G tokens minus generate of 1) is.
            "decode_tokens_per_s": j["timing"]["steady_decode_tokens_per_s"],
            "all_steps_tokens_per_s": j["timing"]["decode_tokens_per_s"],
            "state_bytes": mem.get("decode_state_bytes"),
            "device_used_delta_bytes": used if args.device == "cuda" else None,
            "cuda_graph": j.get("cuda_graph")}


def tensor_bytes(obj, seen=None):
    """Bytes of the torch tensors reachable from a cache object (lists, tuples, dicts, attributes)."""
    import torch

    seen = set() if seen is None else seen
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, (list, tuple)):
        return sum(tensor_bytes(o, seen) for o in obj)
    if isinstance(obj, dict):
        return sum(tensor_bytes(o, seen) for o in obj.values())
    if hasattr(obj, "__dict__"):
        return sum(tensor_bytes(o, seen) for o in vars(obj).values())
    return 0


def load_peer(args, hf_dir):
    import torch
    from transformers import AutoModelForCausalLM

    dev = "cuda" if args.device == "cuda" else "cpu"
    dtype = torch.bfloat16 if dev == "cuda" else torch.float32
    return AutoModelForCausalLM.from_pretrained(hf_dir, dtype=dtype).to(dev).eval()


def peer_decode(args, model, prompt_ids, batch):
    import torch
    from transformers import GenerationConfig

    dev = next(model.parameters()).device
    ids = torch.tensor([prompt_ids] * batch, device=dev)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    try:
        with torch.no_grad():
            if dev.type == "cuda":
                torch.cuda.empty_cache()
                base = torch.cuda.memory_allocated()
            sync()
            t0 = time.perf_counter()
            out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
            sync()
            prefill_ms = (time.perf_counter() - t0) * 1e3
            cache = (torch.cuda.memory_allocated() - base) if dev.type == "cuda" else tensor_bytes(out.past_key_values)
            del out

            def timed(g):
                cfg = GenerationConfig(max_new_tokens=g, do_sample=False, eos_token_id=None, pad_token_id=50256)
                sync()
                t = time.perf_counter()
                model.generate(ids, generation_config=cfg)
                sync()
                return time.perf_counter() - t

            t1, tg = timed(1), timed(args.new_tokens)
        if tg <= t1:
            return {"error": f"generate of {args.new_tokens} tokens took no longer than of 1: raise --new-tokens"}
        rate = batch * (args.new_tokens - 1) / (tg - t1)
        return {"prefill_ms": prefill_ms, "decode_tokens_per_s": rate, "cache_bytes": cache}
    except Exception as e:  # out of memory and the like: reported, the table goes on
        return {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}


def write_json(path, args, rows):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"device": args.device, "new_tokens": args.new_tokens, "rows": rows}, f, indent=1)
    os.replace(tmp, path)


def mib(b):
    return "" if b is None else f"{b / 2**20:,.2f}"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--deltatron", default=os.path.join(REPO, "build/deltatron"))
    p.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    p.add_argument("--configs", default=DEFAULT_CONFIGS,
                   help="comma-separated configs; PATH@fp8 decodes PATH's model with --mla-cache fp8")
    p.add_argument("--contexts", default="1024,8192,32768,131072")
    p.add_argument("--batches", default="1,64")
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--no-peer", action="store_true", help="deltatron only")
    p.add_argument("--work", help="scratch directory (default: a temporary one)")
    p.add_argument("--json", help="output JSON (default $OUT/bench_decode.json, else ./bench_decode.json)")
    args = p.parse_args()
    args.deltatron = os.path.abspath(args.deltatron)
    contexts = [int(c) for c in args.contexts.split(",")]
    batches = [int(b) for b in args.batches.split(",")]
    if args.new_tokens < 12 or min(contexts) < 1 or min(batches) < 1:
        p.error("--new-tokens must be >= 12 (the rate is taken after the first nine decode steps), "
                "contexts and batches >= 1")
    configs = [parse_config(c) for c in args.configs.split(",")]
    for spec, parsed in zip(args.configs.split(","), configs):
        if parsed is None:
            p.error(f"--configs: '{spec}': unknown variant after '@' (known: {', '.join(VARIANTS)})")
    out_json = args.json or os.path.join(os.environ.get("OUT", "."), "bench_decode.json")
    work = args.work or tempfile.mkdtemp(prefix="bench_decode_")
    os.makedirs(work, exist_ok=True)
    shards = prepare_data(args, work)
    rows = []
    for config, extra, suffix in configs:
        name, ckpt = checkpoint(args, work, shards, os.path.join(REPO, config) if not os.path.isabs(config) else config)
        if args.no_peer:
            hf_dir, why = None, "--no-peer"
        elif suffix:
            hf_dir, why = None, "a variant of deltatron's decode: the peer is the plain row's"
        else:
            hf_dir, why = export(args, work, name, ckpt)
        name += suffix
        model = None
        if hf_dir:
            try:
                model = load_peer(args, hf_dir)
            except Exception as e:
                why = f"transformers cannot load it: {type(e).__name__}: {str(e).splitlines()[0][:160]}"
        for context in contexts:
            prompt = prompt_file(args, work, context)
            for batch in batches:
                ours = deltatron_decode(args, ckpt, prompt, batch, extra)
                ids = ours.pop("prompt_ids", None)
                peer = peer_decode(args, model, ids, batch) if model is not None and ids else {"error": why}
                rows.append({"model": name, "context": context, "batch": batch, "deltatron": ours, "transformers": peer})
                write_json(out_json, args, rows)  # after every row: a run cut short keeps what it measured
                print(f"bench_decode: {name} context {context} batch {batch}: deltatron "
                      f"{ours.get('decode_tokens_per_s', ours.get('error'))}, transformers "
                      f"{peer.get('decode_tokens_per_s', peer.get('error'))}", file=sys.stderr, flush=True)
        del model
    head = ("| model | context | batch | deltatron decode tok/s | transformers decode tok/s | ratio | "
            "deltatron prefill ms | transformers prefill ms | deltatron state MiB | measured MiB | transformers cache MiB |")
    print(head)
    print("|" + " --- |" * (head.count("|") - 1))
    for r in rows:
        o, t = r["deltatron"], r["transformers"]
        ours = f"{o['decode_tokens_per_s']:,.0f}" if "decode_tokens_per_s" in o else o.get("error", "")[:60]
        peer = f"{t['decode_tokens_per_s']:,.1f}" if "decode_tokens_per_s" in t else (t.get("error") or "")[:60]
        ratio = (f"{o['decode_tokens_per_s'] / t['decode_tokens_per_s']:.1f}x"
                 if "decode_tokens_per_s" in o and t.get("decode_tokens_per_s") else "")
        prefill = lambda x: f"{x['prefill_ms']:,.1f}" if "prefill_ms" in x else ""
        cells = [r["model"], r["context"], r["batch"], ours, peer, ratio, prefill(o), prefill(t),
                 mib(o.get("state_bytes")), mib(o.get("device_used_delta_bytes")), mib(t.get("cache_bytes"))]
        print("| " + " | ".join(str(c) for c in cells) + " |")
    write_json(out_json, args, rows)
    print(f"bench_decode: wrote {out_json}", file=sys.stderr)


if __name__ == "__main__":
    main()
