"""The peers' training steps at the 124M shapes, on the same GPU, in the same device call as
bench_train (scripts/gpu_check.sh runs both). Method (the peers' end-to-end benchmark's):
batch B x T of random tokens, bf16 autocast, fused torch AdamW, tokens/s over the whole step
(median-free: mean over `steps` after `warm` untimed steps), peak = torch.cuda.max_memory_allocated.

  OUT=results python3 bench/bench_train_peers.py      # writes results/train_peers.json
Env: PEERS=llama_eager,llama_compiled,fla_hybrid (default: all three); B, T.
The fla hybrid needs the fla wheels on PYTHONPATH (scripts/gpu_check.sh installs them from .whl/).
"""
import json
import os
import time

import torch

torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
B = int(os.environ.get("B", 16))
T = int(os.environ.get("T", 1024))
V = 50304
PEERS = os.environ.get("PEERS", "llama_eager,llama_compiled,fla_hybrid").split(",")
results = {}


def bench(name, model, steps=20, warm=8):
    model = model.to("cuda")
    n = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)
    x = torch.randint(0, V, (B, T), device="cuda")
    torch.cuda.reset_peak_memory_stats()
    for i in range(warm + steps):
        if i == warm:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(input_ids=x, labels=x)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    dt = (time.perf_counter() - t0) / steps
    r = dict(params=n, step_ms=dt * 1e3, tok_per_s=B * T / dt, peak_mem_gib=torch.cuda.max_memory_allocated() / 2**30)
    results[name] = r
    print(name, r, flush=True)
    del model, opt
    torch.cuda.empty_cache()


def llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=V, hidden_size=768, intermediate_size=2048, num_hidden_layers=12,
                      num_attention_heads=12, num_key_value_heads=12, max_position_embeddings=T,
                      tie_word_embeddings=True, attn_implementation="sdpa")
    return LlamaForCausalLM(cfg)


def fla_hybrid():
    import torch.nn.functional as F
    import fla.layers.attn as fla_attn
    import fla.ops.common.chunk_o as fla_chunk_o
    from fla.models import GatedDeltaNetConfig, GatedDeltaNetForCausalLM

    def flash_attn_func(q, k, v, causal=True, window_size=(-1, -1), **kw):  # flash-attn stand-in (SDPA)
        H, Hk = q.shape[2], k.shape[2]
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=H != Hk).transpose(1, 2)

    fla_attn.flash_attn_func = flash_attn_func
    fla_chunk_o.TRITON_ABOVE_3_7_1 = True  # timing only: fla's guard against its Hopper backward (fla #640)
    GatedDeltaNetForCausalLM._tied_weights_keys = {"lm_head.weight": "model.embeddings.weight"}
    g = GatedDeltaNetConfig(hidden_size=768, num_hidden_layers=12, num_heads=6, head_dim=128, expand_v=1.0,
                            vocab_size=V, intermediate_size=2048, tie_word_embeddings=True,
                            attn={"layers": [3, 7, 11], "num_heads": 12, "num_kv_heads": 12, "qkv_bias": False,
                                  "window_size": None, "rope_theta": 10000.0})
    return GatedDeltaNetForCausalLM(g)


print("torch", torch.__version__, torch.cuda.get_device_name(), flush=True)
for peer in PEERS:
    try:
        if peer == "llama_eager":
            bench("hf_llama_softmax_124m_eager", llama())
        elif peer == "llama_compiled":
            bench("hf_llama_softmax_124m_compiled", torch.compile(llama()), warm=10)
        elif peer == "fla_hybrid":
            bench("fla_gdn_hybrid_3to1_124m_eager", fla_hybrid())
    except Exception as e:  # a peer that fails is reported, the others still run
        import traceback

        traceback.print_exc()
        results[peer + "_error"] = repr(e)
out = os.environ.get("OUT", ".")
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "train_peers.json"), "w") as f:
    json.dump(results, f, indent=1)
