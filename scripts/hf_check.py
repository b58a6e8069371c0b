#!/usr/bin/env python3
"""Checks a `deltatron export --format hf` directory with Hugging Face transformers, on the CPU.

    python3 scripts/hf_check.py DIR [--deltatron build/deltatron] [--checkpoint CKPT --data GLOB]
                                [--deltatron-logits FILE.safetensors [--greedy-tokens]]

Needs torch, transformers (a version with Qwen3_5ForCausalLM, 5.x) and safetensors; not part of CI.
Exits 0 when every check passes, 1 with the failed checks listed otherwise. The checks:

1. tokenizer: AutoTokenizer.from_pretrained(DIR) encodes a set of texts (ASCII, Unicode, runs of
   spaces and newlines, contractions, digits) to the ids `deltatron tokenize` gives, and decodes
   them back to the text. (`deltatron tokenize` is tiktoken's encode_ordinary, so the texts hold no
   `<|endoftext|>`, which Hugging Face's tokenizer reads as the special token.)
2. model: AutoModelForCausalLM.from_pretrained(DIR) is a Qwen3_5ForCausalLM, every weight of the
   file is used and none is missing, and a forward pass gives finite logits of the vocabulary's width.
3. with --checkpoint and --data: the mean cross-entropy transformers computes on the first batch
   that `deltatron eval --checkpoint CKPT --data GLOB --batches 1` evaluates (B windows of T+1
   tokens, window w = tokens [w*T, w*T + T] of the first shard) against eval's val_loss, in float32.
   Tolerance: relative 1e-4 for an fp32 export, 2e-2 for bf16 (the weights are rounded).
4. with --deltatron-logits FILE: logits that deltatron computed (e.g. `deltatron generate`) against
   transformers' on the same tokens. FILE is a safetensors file with
       input_ids       I32 or I64 [N, T]   (or [T]) the tokens the logits were computed on
       logits          F32 [N, T, V]       (or [T, V]) logits at every position, V = vocab_size
       generated_ids   I32 or I64 [N, G]   optional: greedy continuations of input_ids
   The error per prompt is max |hf - deltatron| / max |hf|, at most 1e-3 for fp32 exports and 2e-2
   for bf16. --greedy-tokens also has transformers continue each prompt greedily for G tokens and
   requires generated_ids to match (with only argmax-tied positions excused, reported).
"""
import argparse
import glob
import json
import os
import subprocess
import sys

import numpy as np

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


def check_logits(args, model, failures):
    import torch
    from safetensors.numpy import load_file

    d = load_file(args.deltatron_logits)
    for key in ("input_ids", "logits"):
        if key not in d:
            fail(failures, f"{args.deltatron_logits}: no tensor '{key}' (the format is in this script's help)")
            return
    ids, dt_logits = d["input_ids"].astype(np.int64), d["logits"].astype(np.float32)
    if ids.ndim == 1:
        ids, dt_logits = ids[None], dt_logits[None]
    V = model.config.vocab_size
    if dt_logits.shape != (*ids.shape, V):
        fail(failures, f"{args.deltatron_logits}: logits {dt_logits.shape}, expected {(*ids.shape, V)}")
        return
    tol = tolerance_for(args, 1e-3, 2e-2)
    model = model.float()  # bf16 weights, float32 arithmetic: the rounding under test is the weights'
    with torch.no_grad():
        for n in range(ids.shape[0]):
            hf = model(input_ids=torch.from_numpy(ids[n:n + 1])).logits[0].numpy()
            err = float(np.abs(hf - dt_logits[n]).max() / max(np.abs(hf).max(), 1e-30))
            agree = float((hf.argmax(-1) == dt_logits[n].argmax(-1)).mean())
            print(f"logits: prompt {n}: max relative error {err:.2e} (tolerance {tol:.0e}), "
                  f"argmax agrees at {agree:.1%} of {ids.shape[1]} positions")
            if not err <= tol:
                fail(failures, f"logits: prompt {n}: max relative error {err:.2e} above {tol:.0e}")
    if args.greedy_tokens:
        check_greedy(args, model, d, ids, failures)


def check_greedy(args, model, d, ids, failures):
    import torch

    if "generated_ids" not in d:
        fail(failures, f"--greedy-tokens: {args.deltatron_logits} has no tensor 'generated_ids'")
        return
    gen = d["generated_ids"].astype(np.int64)
    if gen.ndim == 1:
        gen = gen[None]
    with torch.no_grad():
        for n in range(ids.shape[0]):
            seq = torch.from_numpy(ids[n:n + 1])
            for g in range(gen.shape[1]):
                logits = model(input_ids=seq).logits[0, -1]
                top2 = torch.topk(logits, 2)
                want = int(top2.indices[0])
                if want != gen[n, g]:
                    margin = float(top2.values[0] - top2.values[1])
                    if int(top2.indices[1]) == gen[n, g] and margin <= 1e-3 * float(top2.values[0].abs()):
                        print(f"greedy: prompt {n} token {g}: a near tie ({margin:.2e}) decided the other way")
                    else:
                        fail(failures, f"greedy: prompt {n}: token {g} is {gen[n, g]} in deltatron, {want} in "
                                       f"transformers")
                        break
                seq = torch.cat([seq, torch.tensor([[int(gen[n, g])]])], dim=1)
            print(f"greedy: prompt {n}: {gen.shape[1]} tokens compared")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", help="the export directory")
    p.add_argument("--deltatron", default="build/deltatron", help="the deltatron binary")
    p.add_argument("--checkpoint", help="the checkpoint the export came from (for the loss check)")
    p.add_argument("--data", help="glob of token shards for the loss check, e.g. 'shards/x/*_val_*.bin'")
    p.add_argument("--deltatron-logits", help="safetensors file of deltatron's logits (format above)")
    p.add_argument("--greedy-tokens", action="store_true", help="also compare generated_ids greedily")
    args = p.parse_args()
    if bool(args.checkpoint) != bool(args.data):
        p.error("--checkpoint and --data go together")
    failures = []
    check_tokenizer(args, failures)
    model = load_model(args, failures)
    if args.checkpoint:
        check_loss(args, model, failures)
    if args.deltatron_logits:
        check_logits(args, model, failures)
    if failures:
        print(f"hf_check: {len(failures)} check(s) failed")
        return 1
    print("hf_check: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
