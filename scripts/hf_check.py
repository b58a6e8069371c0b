#!/usr/bin/env python3
"""Checks a `deltatron export --format hf` directory with Hugging Face transformers, on the CPU.

    python3 scripts/hf_check.py DIR [--deltatron build/deltatron] [--checkpoint CKPT [--data GLOB]]
                                [--device cpu|cuda] [--new-tokens 32]

Needs torch, transformers (a version with Qwen3_5ForCausalLM, 5.x) and safetensors; not part of CI
(tests/hf/test_hf_transformers.sh runs it, labelled gpu). transformers runs on the CPU in float32.
Exits 0 when every check passes, 1 with the failed checks listed otherwise. The checks:

1. tokenizer: AutoTokenizer.from_pretrained(DIR) encodes a set of texts (ASCII, Unicode, runs of
   spaces and newlines, contractions, digits) to the ids `deltatron tokenize` gives, and decodes
   them back to the text. (`deltatron tokenize` is tiktoken's encode_ordinary, so the texts hold no
   `<|endoftext|>`, which Hugging Face's tokenizer reads as the special token.)
2. model: AutoModelForCausalLM.from_pretrained(DIR) is a Qwen3_5ForCausalLM, every weight of the
   file is used and none is missing, and a forward pass gives finite logits of the vocabulary's width.
3. with --checkpoint: for each of PROMPTS, `deltatron generate --temperature 0 --ignore-eos
   --max-new-tokens G --logits-out F --device D` on the checkpoint, then
   - logits: transformers' forward over the context deltatron fed (the prompt, then its generated
     tokens) against deltatron's logits at every position, the prompt's from the chunked prefill and
     the rest from the decode steps: max |hf - deltatron| / max |hf| at most 1e-3 for an fp32 export,
     2e-2 for bf16 (the weights are rounded; the arithmetic stays float32);
   - greedy: transformers' `generate` (greedy, its own recurrent and KV caches, EOS not stopping it)
     from the prompt gives the same G tokens; a position where transformers' top two logits are
     within 1e-3 relative (a near tie) is reported and ends that prompt's comparison.
4. with --checkpoint and --data: the mean cross-entropy transformers computes on the first batch
   that `deltatron eval --checkpoint CKPT --data GLOB --batches 1` evaluates (B windows of T+1
   tokens, window w = tokens [w*T, w*T + T] of the first shard) against eval's val_loss, in float32.
   Tolerance: relative 1e-4 for an fp32 export, 2e-2 for bf16.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

PROMPTS = [
    "The history of the city begins",
    "def fibonacci(n):\n    ",
    "In 1969, the first",
]

TEXTS = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "  leading spaces, trailing spaces   ",
    "line one\nline two\n\n\ttabbed\r\nwindows line",
    "Numbers: 3.14159, 2024-01-02, 1,000,000 and 007.",
    "Contractions: don't, I'm, we'll, they've, it's, she'd.",
    "Unicode: café, naïve, Straße, 日本語のテキスト, Ελληνικά, עברית, emoji 🙂🚀",
    "Code: def f(x):\n    return x ** 2  # square\n",
    "Mixed   whitespace \u00a0non-breaking\u3000ideographic",
]


def fail(failures, msg):
    print(f"FAIL: {msg}")
    failures.append(msg)


def deltatron_tokenize(binary, text):
    r = subprocess.run([binary, "tokenize"], input=text.encode("utf-8"), capture_output=True, check=True)
    return [int(t) for t in r.stdout.split()]


def check_tokenizer(args, failures):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(args.dir)
    print(f"tokenizer: {type(tok).__name__}, {len(tok)} tokens, eos {tok.eos_token!r} = {tok.eos_token_id}")
    if tok.eos_token_id != 50256:
        fail(failures, f"tokenizer eos_token_id is {tok.eos_token_id}, expected 50256")
    for text in TEXTS:
        hf_ids = tok.encode(text, add_special_tokens=False)
        dt_ids = deltatron_tokenize(args.deltatron, text)
        if hf_ids != dt_ids:
            fail(failures, f"tokenizer: {text!r}: transformers {hf_ids} but deltatron {dt_ids}")
        back = tok.decode(hf_ids)
        if back != text:
            fail(failures, f"tokenizer: {text!r} decodes back to {back!r}")
    print(f"tokenizer: {len(TEXTS)} texts encoded by both and compared")
    return tok


def load_model(args, failures):
    import torch
    from transformers import AutoModelForCausalLM, Qwen3_5ForCausalLM

    model, info = AutoModelForCausalLM.from_pretrained(args.dir, output_loading_info=True)
    model.eval()
    print(f"model: {type(model).__name__}, dtype {model.dtype}, "
          f"{sum(p.numel() for p in model.parameters())} parameters")
    if not isinstance(model, Qwen3_5ForCausalLM):
        fail(failures, f"model class is {type(model).__name__}, expected Qwen3_5ForCausalLM")
    for key in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        if info.get(key):
            fail(failures, f"loading the model: {key}: {info[key]}")
    with torch.no_grad():
        ids = torch.tensor([[15496, 995, 11, 428, 318, 257, 1332, 13]])
        logits = model(input_ids=ids).logits
    if tuple(logits.shape) != (1, ids.shape[1], model.config.vocab_size):
        fail(failures, f"logits of shape {tuple(logits.shape)}")
    if not torch.isfinite(logits).all():
        fail(failures, "the logits are not all finite")
    return model


def check_loss(args, model, failures):
    import torch

    r = subprocess.run([args.deltatron, "eval", "--checkpoint", args.checkpoint, "--data", args.data,
                        "--batches", "1", "--device", "cpu", "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        fail(failures, f"deltatron eval failed: {r.stderr.strip()}")
        return
    ev = json.loads(r.stdout)
    B, T = ev["batch_size"], ev["seq_len"]
    shards = sorted(glob.glob(args.data))
    header = np.fromfile(shards[0], dtype=np.int32, count=256)
    tokens = np.fromfile(shards[0], dtype=np.uint16, offset=1024, count=int(header[2])).astype(np.int64)
    if (len(tokens) - 1) // T < B:
        fail(failures, f"{shards[0]} holds fewer than {B} windows of {T + 1} tokens; eval's first batch spans shards")
        return
    windows = np.stack([tokens[w * T: w * T + T + 1] for w in range(B)])
    x, y = torch.from_numpy(windows[:, :T]), torch.from_numpy(windows[:, 1:])
    with torch.no_grad():
        logits = model.float()(input_ids=x).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).item()
    rel = abs(loss - ev["val_loss"]) / abs(ev["val_loss"])
    tol = tolerance_for(args, 1e-4, 2e-2)
    print(f"loss: transformers {loss:.8f}, deltatron eval {ev['val_loss']:.8f} on {B} x {T} tokens: "
          f"relative difference {rel:.2e} (tolerance {tol:.0e})")
    if not rel <= tol:
        fail(failures, f"loss: relative difference {rel:.2e} above {tol:.0e}")


def tolerance_for(args, fp32, bf16):
    with open(os.path.join(args.dir, "config.json")) as f:
        dtype = json.load(f).get("dtype")
    return bf16 if dtype == "bfloat16" else fp32


def deltatron_generate(args, prompt, out):
    """deltatron's greedy continuation of `prompt` and its logits at every position (--logits-out)."""
    from safetensors import safe_open

    r = subprocess.run([args.deltatron, "generate", "--checkpoint", args.checkpoint, "--prompt", prompt,
                        "--temperature", "0", "--ignore-eos", "--max-new-tokens", str(args.new_tokens),
                        "--logits-out", out, "--device", args.device, "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"deltatron generate failed: {r.stderr.strip()}")
    with safe_open(out, framework="numpy") as f:
        t = {k: f.get_tensor(k) for k in f.keys()}
        prompt_tokens = int(f.metadata()["prompt_tokens"])
    return t["input_ids"][0].astype(np.int64), t["logits"][0], t["generated_ids"][0].astype(np.int64), \
        prompt_tokens, json.loads(r.stdout)["timing"]


def check_generate(args, model, failures, workdir):
    import torch
    from transformers import GenerationConfig

    tol = tolerance_for(args, 1e-3, 2e-2)
    model = model.float()  # bf16 weights, float32 arithmetic: the rounding under test is the weights'
    for n, prompt in enumerate(PROMPTS):
        try:
            ids, dt_logits, gen, T, timing = deltatron_generate(args, prompt, os.path.join(workdir, f"p{n}.safetensors"))
        except RuntimeError as e:
            fail(failures, f"prompt {n}: {e}")
            continue
        with torch.no_grad():
            hf = model(input_ids=torch.from_numpy(ids[None])).logits[0].numpy()
        err = float(np.abs(hf - dt_logits).max() / max(np.abs(hf).max(), 1e-30))
        err_prefill = float(np.abs(hf[:T] - dt_logits[:T]).max() / max(np.abs(hf[:T]).max(), 1e-30))
        agree = float((hf.argmax(-1) == dt_logits.argmax(-1)).mean())
        print(f"logits: prompt {n} ({T} prompt + {len(ids) - T} decoded positions): max relative error {err:.2e}"
              f" (prefill {err_prefill:.2e}; tolerance {tol:.0e}), argmax agrees at {agree:.1%}; deltatron "
              f"{args.device}: prefill {timing['prefill_ms']:.1f} ms, decode {timing['decode_tokens_per_s']:.0f} tokens/s")
        if not err <= tol:
            fail(failures, f"logits: prompt {n}: max relative error {err:.2e} above {tol:.0e}")
        G = len(gen)
        # No EOS in the config: like --ignore-eos, <|endoftext|> is a token like any other.
        cfg = GenerationConfig(max_new_tokens=G, do_sample=False, eos_token_id=None, pad_token_id=50256,
                               output_scores=True, return_dict_in_generate=True)
        with torch.no_grad():
            out = model.generate(torch.from_numpy(ids[None, :T]), generation_config=cfg)
        hf_gen = out.sequences[0, T:].numpy()
        same = 0
        while same < min(G, len(hf_gen)) and hf_gen[same] == gen[same]:
            same += 1
        if same == G:
            print(f"greedy: prompt {n}: transformers' generate gives the same {G} tokens")
            continue
        scores = out.scores[same][0] if same < len(out.scores) else None
        if scores is not None:
            top2 = torch.topk(scores, 2)
            margin = float(top2.values[0] - top2.values[1])
            if int(top2.indices[1]) == gen[same] and margin <= 1e-3 * float(top2.values[0].abs()):
                print(f"greedy: prompt {n}: {same} tokens equal, then a near tie ({margin:.2e}) decided the other way")
                continue
        fail(failures, f"greedy: prompt {n}: token {same} is {gen[same]} in deltatron, "
                       f"{hf_gen[same] if same < len(hf_gen) else 'none'} in transformers")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", help="the export directory")
    p.add_argument("--deltatron", default="build/deltatron", help="the deltatron binary")
    p.add_argument("--checkpoint", help="the checkpoint the export came from (logits, greedy and loss checks)")
    p.add_argument("--data", help="glob of token shards for the loss check, e.g. 'shards/x/*_val_*.bin'")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="deltatron generate's device")
    p.add_argument("--new-tokens", type=int, default=32, help="greedy tokens compared per prompt (default 32)")
    args = p.parse_args()
    if args.data and not args.checkpoint:
        p.error("--data needs --checkpoint")
    if args.new_tokens < 1:
        p.error("--new-tokens must be >= 1")
    failures = []
    check_tokenizer(args, failures)
    model = load_model(args, failures)
    if args.checkpoint:
        with tempfile.TemporaryDirectory() as workdir:
            check_generate(args, model, failures, workdir)
    if args.data:
        check_loss(args, model, failures)
    if failures:
        print(f"hf_check: {len(failures)} check(s) failed")
        return 1
    print("hf_check: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
