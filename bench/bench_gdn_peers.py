"""fla's chunk_gated_delta_rule at bench_gdn's shapes, on the same GPU, in the same device call.

Invocation as ../shared/peers/bench_fla_kernels.py (bf16 q, k, v; fp32 log-decay g = logsigmoid;
beta; q/k l2norm inside fla's kernel; triton.testing.do_bench medians). Writes
$OUT/fla_kernels.json keyed B{B}_T{T}_H{H}_D{D} with fla_gdn_fwd_ms and fla_gdn_fwdbwd_ms,
which `bench_gdn --fla-json` reads (rewritten after every shape). Needs torch, triton and the fla
wheels (scripts/gpu_check.sh).
"""
import json
import os

import torch
import torch.nn.functional as F
from triton.testing import do_bench

from fla.ops.gated_delta_rule import chunk_gated_delta_rule
import fla.ops.common.chunk_o as fla_chunk_o

# fla refuses its gated backward on Hopper with Triton < 3.7.1 (fla issue #640, wrong results).
# For TIMING ONLY the guard is lifted, as in the peer script; these gradients are no reference.
fla_chunk_o.TRITON_ABOVE_3_7_1 = True

SHAPES = [(16, 1024, 12, 64), (4, 4096, 16, 128), (1, 32768, 16, 128)]


def main():
    out_dir = os.environ.get("OUT", ".")
    os.makedirs(out_dir, exist_ok=True)
    print("torch", torch.__version__, torch.cuda.get_device_name(), flush=True)
    results = {}
    for B, T, H, D in SHAPES:
        dev, bf = "cuda", torch.bfloat16
        q, k, v = (torch.randn(B, T, H, D, device=dev, dtype=bf, requires_grad=True) for _ in range(3))
        g = F.logsigmoid(torch.randn(B, T, H, device=dev)).requires_grad_()
        beta = torch.rand(B, T, H, device=dev, dtype=bf).sigmoid().requires_grad_()

        def fwd():
            return chunk_gated_delta_rule(q, k, v, g, beta, use_qk_l2norm_in_kernel=True)[0]

        do = torch.randn_like(fwd())

        def fwdbwd():
            fwd().backward(do)

        with torch.no_grad():
            t_f = do_bench(fwd, warmup=50, rep=200, return_mode="median")
        t_fb = do_bench(fwdbwd, warmup=50, rep=300, return_mode="median", grad_to_none=[q, k, v, g, beta])
        key = f"B{B}_T{T}_H{H}_D{D}"
        results[key] = dict(fla_gdn_fwd_ms=t_f, fla_gdn_fwdbwd_ms=t_fb, tokens=B * T)
        print(key, results[key], flush=True)
        del q, k, v, g, beta, do
        torch.cuda.empty_cache()
        # after every shape, so that a run cut short by its time limit still leaves numbers
        with open(os.path.join(out_dir, "fla_kernels.json"), "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
