#!/usr/bin/env python3
"""Golden reference files from Hugging Face transformers, for tests/trainer/test_golden_*.cpp.

    python3 scripts/make_golden.py --out tests/golden

Needs torch, transformers (5.x, with Qwen3.5 and DeepSeek-V3) and h5py; runs on the CPU
in a few seconds and is deterministic (fixed seeds). tests/golden/README.md lists what each
file holds.

How the reference is computed:
  * Weights are drawn in float32 (stored as such), then the module is cast to float64, so the
    stored weights are exactly what the float64 reference used.
  * Hugging Face's Qwen3.5 and DeepSeek-V3 code casts to float32 in places (RMSNorm's
    x.float(), softmax(dtype=torch.float32), the torch fallback of the chunked gated delta
    rule). `true_float64()` redirects those casts to float64 while the reference runs, so the
    whole computation is float64. The script also runs the model without that redirection and
    prints the difference (it must be small: the redirection changes precision, not the math).
  * RoPE inverse frequencies, which HF computes in float32 at construction, are recomputed in
    float64 from the same formula: theta^(-2i/rotary_dim).
  * Checks, printed and stored as attributes: no torch op of the reference forward yields a
    tensor below float64 (`below_float64_ops`, empty); HF's recurrent delta rule put in place of
    its chunked one gives the same output to rounding (`rel_diff_gdn_recurrent`, < 1e-12).
  * TF32 is off; everything runs on the CPU.
  * Weights get scales where every term matters: unit-variance projections, GDN decays
    exp(g) between about 0.25 and 0.96 per step, norm weights away from their init.
"""
import argparse
import contextlib
import math
import os
import sys

import numpy as np
import torch
import h5py
import transformers
from transformers.models.qwen3_5 import modeling_qwen3_5 as mq
from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5TextConfig
from transformers.models.deepseek_v3 import modeling_deepseek_v3 as mds
from transformers.models.deepseek_v3.configuration_deepseek_v3 import DeepseekV3Config

SEED = 20260101

# ---------------------------------------------------------------------------------------------
# float64 everywhere
# ---------------------------------------------------------------------------------------------


class _TorchF64:
    """Stands in for `torch` inside a modeling module: torch.float32 / torch.float -> float64."""

    def __getattr__(self, name):
        if name in ("float32", "float"):
            return torch.float64
        return getattr(torch, name)


class LowPrecisionWatch(torch.overrides.TorchFunctionMode):
    """Records every torch op of the forward that produces a tensor below float64 (expected: none)."""

    def __init__(self):
        super().__init__()
        self.ops = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != torch.float64:
                self.ops.add(getattr(func, "__qualname__", str(func)))
        return out


@contextlib.contextmanager
def true_float64(*modules):
    saved = [(m, m.torch) for m in modules]
    orig_float = torch.Tensor.float
    watch = LowPrecisionWatch()
    try:
        for m in modules:
            m.torch = _TorchF64()
        torch.Tensor.float = lambda self, *a, **k: self.to(torch.float64)
        with watch:
            yield watch
    finally:
        torch.Tensor.float = orig_float
        for m, t in saved:
            m.torch = t


def rope_inv_freq_f64(theta, dim):
    return 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))


# ---------------------------------------------------------------------------------------------
# weights: drawn by name, in float32
# ---------------------------------------------------------------------------------------------


def draw(gen, shape, std=1.0, mean=0.0):
    return torch.randn(shape, generator=gen, dtype=torch.float32) * std + mean


def uniform(gen, shape, lo, hi):
    return torch.rand(shape, generator=gen, dtype=torch.float32) * (hi - lo) + lo


def init_value(name, shape, gen, embed_std):
    """The value of parameter `name`: scales chosen so that every term of the layer matters."""
    if name.endswith("A_log"):  # A in [0.5, 3]: with dt_bias below, exp(g) in ~[0.25, 0.96]
        return torch.log(uniform(gen, shape, 0.5, 3.0))
    if name.endswith("dt_bias"):
        return uniform(gen, shape, -2.5, -0.5)
    if name.endswith("linear_attn.norm.weight") or name.endswith("a_layernorm.weight"):
        return draw(gen, shape, 0.3, 1.0)  # plain RMSNorm (weight * x), init 1: perturbed
    if name.endswith("norm.weight"):  # zero-centred RMSNorm (1 + weight) * x, init 0: perturbed
        return draw(gen, shape, 0.3)
    if name.endswith("conv1d.weight"):  # [C, 1, K]
        return draw(gen, shape, 0.5)
    if name.endswith("embed_tokens.weight") or name.endswith("lm_head.weight"):
        return draw(gen, shape, embed_std)
    if name.endswith(".weight") and len(shape) == 2:  # Linear [out, in]
        gain = 0.5 if any(s in name for s in ("out_proj", "o_proj", "down_proj")) else 1.0
        return draw(gen, shape, gain / math.sqrt(shape[1]))
    raise ValueError(f"make_golden: no init rule for parameter {name} {tuple(shape)}")


def set_weights(module, gen, embed_std=0.2, prefix=""):
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.copy_(init_value(prefix + name, p.shape, gen, embed_std))


# ---------------------------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------------------------


def versions():
    return {
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
        "h5py_version": h5py.__version__,
        "numpy_version": np.__version__,
        "python_version": sys.version.split()[0],
        "generator": "scripts/make_golden.py",
        "seed": SEED,
    }


def write_attrs(f, attrs):
    for k, v in attrs.items():
        if isinstance(v, str):
            f.attrs[k] = np.bytes_(v)  # fixed-length ASCII: simplest to read from C
        else:
            f.attrs[k] = v


def put(f, path, t, dtype):
    a = t.detach().cpu().numpy().astype(dtype)
    f.create_dataset(path, data=a)


def check_float64(what, watch, d_rec=None):
    """Prints (and records in the file) what would make the reference less than float64."""
    if watch.ops:
        print(f"WARNING {what}: ops below float64 in the reference: {sorted(watch.ops)}")
    if d_rec is not None and not 0 < d_rec < 1e-12:
        print(f"WARNING {what}: chunked vs recurrent delta rule differ by {d_rec:.2e}")


def rel(a, b):
    return (torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b)).item()


def report(title, named):
    print(f"  {title}:")
    for n, t in named:
        print(f"    {n:60s} {str(tuple(t.shape)):18s} |.|={torch.linalg.vector_norm(t).item():.4e}")


def causal_additive_mask(B, T, dtype):
    m = torch.full((T, T), torch.finfo(dtype).min, dtype=dtype).triu(1)
    return m[None, None].expand(B, 1, T, T).contiguous()


# ---------------------------------------------------------------------------------------------
# Qwen3.5 (text) model
# ---------------------------------------------------------------------------------------------


def qwen35_config(hidden, layer_types, head_dim=32, partial_rotary_factor=0.25, tie=True):
    cfg = Qwen3_5TextConfig(
        vocab_size=240,
        hidden_size=hidden,
        intermediate_size=56,
        num_hidden_layers=len(layer_types),
        layer_types=layer_types,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=head_dim,
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        linear_key_head_dim=16,
        linear_value_head_dim=16,
        linear_conv_kernel_dim=4,
        hidden_act="silu",
        rms_norm_eps=1e-6,
        max_position_embeddings=256,
        tie_word_embeddings=tie,
        attention_bias=False,
        partial_rotary_factor=partial_rotary_factor,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                         "partial_rotary_factor": partial_rotary_factor},
    )
    cfg._attn_implementation = "eager"
    return cfg


def rotary_dim_of(cfg):
    return int(cfg.head_dim * cfg.rope_parameters.get("partial_rotary_factor", 1.0))


def recurrent_gated_delta_rule(query, key, value, g, beta, chunk_size=64, initial_state=None,
                               output_final_state=False, use_qk_l2norm_in_kernel=False, **kwargs):
    """HF's token-by-token torch fallback, called where HF calls the chunked one (a cross-check)."""
    return mq.torch_recurrent_gated_delta_rule(
        query, key, value, g=g, beta=beta, initial_state=initial_state,
        output_final_state=output_final_state, use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel)


@contextlib.contextmanager
def gdn_recurrent():
    chunked = mq.torch_chunk_gated_delta_rule
    mq.torch_chunk_gated_delta_rule = recurrent_gated_delta_rule
    try:
        yield
    finally:
        mq.torch_chunk_gated_delta_rule = chunked


def make_qwen35_model(out):
    B, T = 2, 37
    # hidden 48 differs from every other width here (GDN key 32, value 64, conv 128; attention
    # 4 heads x 32 = 128, gate included 256; MLP 56; vocab 240), so a mixed-up size cannot pass.
    cfg = qwen35_config(hidden=48, layer_types=["linear_attention"] * 3 + ["full_attention"])
    gen = torch.Generator().manual_seed(SEED)
    model = mq.Qwen3_5ForCausalLM(cfg)
    assert model.config._attn_implementation == "eager", model.config._attn_implementation
    assert model.lm_head.weight is model.model.embed_tokens.weight, "expected tied embeddings"
    set_weights(model, gen, embed_std=0.25)
    model.eval()
    model.double()
    rot = model.model.rotary_emb
    rdim = rotary_dim_of(cfg)
    assert rot.inv_freq.numel() * 2 == rdim, (rot.inv_freq.shape, rdim)
    rot.inv_freq = rope_inv_freq_f64(cfg.rope_parameters["rope_theta"], rdim)
    if hasattr(rot, "original_inv_freq"):
        rot.original_inv_freq = rot.inv_freq.clone()

    seq = torch.randint(0, cfg.vocab_size, (B, T + 1), generator=gen)
    input_ids, target_ids = seq[:, :T].contiguous(), seq[:, 1:].contiguous()

    def run():
        model.zero_grad(set_to_none=True)
        logits = model(input_ids=input_ids, use_cache=False).logits
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, cfg.vocab_size), target_ids.reshape(-1))  # mean over B*T
        loss.backward()
        return logits.detach(), loss.detach()

    logits_hf32, _ = run()  # HF's own float32 casts in place, for the printed comparison
    with true_float64(mq), gdn_recurrent():
        logits_rec, _ = run()
    with true_float64(mq) as watch:
        logits, loss = run()
    assert logits.dtype == torch.float64
    d_cast, d_rec = rel(logits_hf32, logits), rel(logits_rec, logits)
    # In true float64 the chunked and the recurrent delta rule agree to rounding; a float32 cast
    # left anywhere would show here as ~1e-7.
    check_float64("qwen35_model", watch, d_rec)
    params = dict(model.named_parameters())  # the tied lm_head.weight appears once
    grads = {n: p.grad for n, p in params.items()}
    print(f"qwen35_model: loss {loss.item():.10f} (log V = {math.log(cfg.vocab_size):.4f}); "
          f"logits: HF's float32 casts change them by {d_cast:.2e}, recurrent instead of "
          f"chunked GDN by {d_rec:.2e} (relative)")
    report("grads", grads.items())
    for n, g in grads.items():
        assert g is not None and torch.linalg.vector_norm(g) > 0, f"no gradient reaches {n}"

    path = os.path.join(out, "qwen35_model.h5")
    with h5py.File(path, "w") as f:
        write_attrs(f, versions())
        write_attrs(f, {
            "description": "Qwen3_5ForCausalLM (random weights, tied embeddings): loss = mean "
                           "cross_entropy(logits(input_ids), target_ids) over B*T; "
                           "grads = d loss / d param",
            "model_class": "Qwen3_5ForCausalLM",
            "config_json": cfg.to_json_string(use_diff=False),
            "rel_diff_hf_float32_casts": d_cast,
            "rel_diff_gdn_recurrent": d_rec,
            "below_float64_ops": ",".join(sorted(watch.ops)),
        })
        put(f, "input_ids", input_ids, np.int32)
        put(f, "target_ids", target_ids, np.int32)
        put(f, "logits", logits, np.float64)
        f.create_dataset("loss", data=np.float64(loss.item()))
        for n, p in params.items():
            put(f, f"params/{n}", p, np.float32)  # exact: drawn in float32
            put(f, f"grads/{n}", grads[n], np.float64)
    return path


# ---------------------------------------------------------------------------------------------
# Qwen3.5 layers alone: GatedDeltaNet (T=70 crosses HF's 64-token chunk) and gated attention
# ---------------------------------------------------------------------------------------------


def layer_golden(out, fname, kind, B, T, hidden, seed_offset):
    gen = torch.Generator().manual_seed(SEED + seed_offset)
    if kind == "gdn":
        cfg = qwen35_config(hidden=hidden, layer_types=["linear_attention"])
        layer = mq.Qwen3_5GatedDeltaNet(cfg, layer_idx=0)
        prefix = "model.layers.0.linear_attn"
    else:
        # the other rotary fraction Qwen uses: head_dim 16 * 0.5 = 8 rotary dims
        cfg = qwen35_config(hidden=hidden, layer_types=["full_attention"], head_dim=16,
                            partial_rotary_factor=0.5)
        layer = mq.Qwen3_5Attention(cfg, layer_idx=0)
        prefix = "model.layers.0.self_attn"
    set_weights(layer, gen, prefix=prefix + ".")
    layer.eval()
    layer.double()
    x = draw(gen, (B, T, hidden)).double().requires_grad_(True)
    R = draw(gen, (B, T, hidden)).double()

    def run():
        layer.zero_grad(set_to_none=True)
        x.grad = None
        if kind == "gdn":
            y = layer(hidden_states=x)
        else:
            rot = mq.Qwen3_5TextRotaryEmbedding(cfg)
            rot.inv_freq = rope_inv_freq_f64(cfg.rope_parameters["rope_theta"], rotary_dim_of(cfg))
            pos = torch.arange(T)[None, None].expand(3, B, T)
            cos, sin = rot(x, pos)
            y, _ = layer(hidden_states=x, position_embeddings=(cos, sin),
                         attention_mask=causal_additive_mask(B, T, x.dtype))
        (y * R).sum().backward()
        return y.detach()

    y_hf32 = run()
    d_rec = None
    if kind == "gdn":
        with true_float64(mq), gdn_recurrent():
            y_rec = run()
    with true_float64(mq) as watch:
        y = run()  # last: its gradients are the ones stored
    if kind == "gdn":
        d_rec = rel(y_rec, y)
    check_float64(fname, watch, d_rec)
    params = dict(layer.named_parameters())
    print(f"{fname}: |y| {torch.linalg.vector_norm(y).item():.4e}; "
          f"HF's float32 casts differ by {rel(y_hf32, y):.2e} relative"
          + (f"; recurrent vs chunked GDN {d_rec:.2e}" if d_rec is not None else ""))
    report("grads", [("x", x.grad)] + [(n, p.grad) for n, p in params.items()])
    path = os.path.join(out, fname)
    with h5py.File(path, "w") as f:
        write_attrs(f, versions())
        write_attrs(f, {
            "description": f"Qwen3.5 {type(layer).__name__} alone (random weights): y = layer(x) "
                           "with a causal mask; grads of sum(y * R)",
            "module_class": type(layer).__name__,
            "prefix": prefix,
            "config_json": cfg.to_json_string(use_diff=False),
            "rel_diff_hf_float32_casts": rel(y_hf32, y),
            "rel_diff_gdn_recurrent": d_rec if d_rec is not None else 0.0,
            "below_float64_ops": ",".join(sorted(watch.ops)),
        })
        put(f, "x", x, np.float32)
        put(f, "R", R, np.float32)
        put(f, "y", y, np.float64)
        put(f, "dx", x.grad, np.float64)
        for n, p in params.items():
            put(f, f"params/{prefix}.{n}", p, np.float32)
            put(f, f"grads/{prefix}.{n}", p.grad, np.float64)
    return path


# ---------------------------------------------------------------------------------------------
# DeepSeek-V3 attention (MLA) alone
# ---------------------------------------------------------------------------------------------


def make_mla(out):
    B, T, hidden = 2, 37, 48
    gen = torch.Generator().manual_seed(SEED + 3)
    cfg = DeepseekV3Config(
        vocab_size=256, hidden_size=hidden, intermediate_size=64, moe_intermediate_size=16,
        num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=4,
        n_routed_experts=4, n_shared_experts=1, num_experts_per_tok=2, n_group=1, topk_group=1,
        first_k_dense_replace=1,
        q_lora_rank=24, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
        rms_norm_eps=1e-6, max_position_embeddings=256, attention_bias=False,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
    )
    cfg._attn_implementation = "eager"
    assert cfg.rope_interleave, "expected DeepSeek-V3's default rope_interleave=True"
    layer = mds.DeepseekV3Attention(cfg, layer_idx=0)
    prefix = "model.layers.0.self_attn"
    set_weights(layer, gen, prefix=prefix + ".")
    layer.eval()
    layer.double()
    rot = mds.DeepseekV3RotaryEmbedding(cfg)
    assert rot.inv_freq.numel() * 2 == cfg.qk_rope_head_dim, rot.inv_freq.shape
    theta = cfg.rope_parameters["rope_theta"]
    rot.inv_freq = rope_inv_freq_f64(theta, cfg.qk_rope_head_dim)
    x = draw(gen, (B, T, hidden)).double().requires_grad_(True)
    R = draw(gen, (B, T, hidden)).double()

    def run():
        layer.zero_grad(set_to_none=True)
        x.grad = None
        cos, sin = rot(x, torch.arange(T)[None].expand(B, T))
        y, _ = layer(hidden_states=x, position_embeddings=(cos, sin),
                     attention_mask=causal_additive_mask(B, T, x.dtype))
        (y * R).sum().backward()
        return y.detach()

    y_hf32 = run()
    with true_float64(mds) as watch:
        y = run()
    check_float64("deepseek_v3_mla", watch)
    params = dict(layer.named_parameters())
    print(f"deepseek_v3_mla: |y| {torch.linalg.vector_norm(y).item():.4e}; "
          f"HF's float32 casts differ by {rel(y_hf32, y):.2e} relative")
    report("grads", [("x", x.grad)] + [(n, p.grad) for n, p in params.items()])
    path = os.path.join(out, "deepseek_v3_mla.h5")
    with h5py.File(path, "w") as f:
        write_attrs(f, versions())
        write_attrs(f, {
            "description": "DeepseekV3Attention alone (random weights, q_lora_rank > 0, "
                           "rope_interleave): y = attn(x) with a causal mask, positions 0..T-1; "
                           "grads of sum(y * R)",
            "module_class": "DeepseekV3Attention",
            "prefix": prefix,
            "config_json": cfg.to_json_string(use_diff=False),
            "rel_diff_hf_float32_casts": rel(y_hf32, y),
            "below_float64_ops": ",".join(sorted(watch.ops)),
        })
        put(f, "x", x, np.float32)
        put(f, "R", R, np.float32)
        put(f, "y", y, np.float64)
        put(f, "dx", x.grad, np.float64)
        for n, p in params.items():
            put(f, f"params/{prefix}.{n}", p, np.float32)
            put(f, f"grads/{prefix}.{n}", p.grad, np.float64)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for the .h5 files")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_num_threads(4)
    assert not transformers.utils.is_flash_linear_attention_available(), \
        "make_golden: uninstall flash-linear-attention: the reference is HF's torch fallback"
    paths = [
        make_qwen35_model(args.out),
        # T = 70 > 64: HF's chunked delta rule runs two chunks, the second one padded
        layer_golden(args.out, "qwen35_gdn_layer.h5", "gdn", B=1, T=70, hidden=24, seed_offset=1),
        layer_golden(args.out, "qwen35_attn_layer.h5", "attn", B=2, T=37, hidden=24,
                     seed_offset=2),
        make_mla(args.out),
    ]
    for p in paths:
        print(f"wrote {p} ({os.path.getsize(p)} bytes)")


if __name__ == "__main__":
    main()
