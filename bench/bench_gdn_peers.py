"""fla's chunk_gated_delta_rule at bench_gdn's shapes, on the same GPU, in the same device call.

Invocation as the peers' fla kernel benchmark (bf16 q, k, v; fp32 log-decay g = logsigmoid;
beta; q/k l2norm inside fla's kernel). Each shape is timed three ways:
  - triton.testing.do_bench medians (L2 flushed before each run, Python's launches included: the
    peer script's way): fla_gdn_fwd_ms, fla_gdn_fwdbwd_ms;
  - the host's time to launch one call (perf_counter, no sync): fla_gdn_fwd_host_ms, ...; when it
    is close to the do_bench time, do_bench measured Python, not the GPU;
  - replays of a CUDA graph of 20 calls (GPU time only, L2 warm): fla_gdn_fwd_graph_ms, ...
    (left out, with the reason printed, if fla cannot be captured)
Writes $OUT/fla_kernels.json keyed B{B}_T{T}_H{H}_D{D}. Run it in several processes (Triton
autotunes anew in each): every process appends its numbers to the key's "samples" and the key's
top-level fields become the fastest sample's, which `bench_gdn --fla-json` compares with.
Needs torch, triton and the fla wheels (tools/dev/gpu_quick.sh, scripts/gpu_check.sh).

FLA_PROFILE=B,T,H,D: instead, for a profiler started with `ncu --profile-from-start off`: autotune at
that shape, then one forward and one forward + backward between cudaProfilerStart and Stop.
"""
import json
import os
import statistics
import sys
import time


def profile_shape():
    """FLA_PROFILE as (B, T, H, D), or None; checked before torch loads, so a bad value fails at once."""
    text = os.environ.get("FLA_PROFILE", "")
    if not text:
        return None
    parts = text.split(",")
    if len(parts) != 4 or not all(x.strip().isdigit() and int(x) > 0 for x in parts):
        sys.exit(f"bench_gdn_peers.py: FLA_PROFILE must be B,T,H,D (four positive integers, e.g. 4,4096,16,128), "
                 f"got {text!r}")
    return tuple(int(x) for x in parts)


PROFILE_SHAPE = profile_shape()

import torch  # noqa: E402  (after the FLA_PROFILE check)
import torch.nn.functional as F  # noqa: E402
from triton.testing import do_bench  # noqa: E402

from fla.ops.gated_delta_rule import chunk_gated_delta_rule  # noqa: E402
import fla.ops.common.chunk_o as fla_chunk_o  # noqa: E402

# fla refuses its gated backward on Hopper with Triton < 3.7.1 (fla issue #640, wrong results).
# For TIMING ONLY the guard is lifted, as in the peer script; these gradients are no reference.
fla_chunk_o.TRITON_ABOVE_3_7_1 = True

SHAPES = [(16, 1024, 12, 64), (4, 4096, 16, 128), (1, 32768, 16, 128)]
FIELDS = ["fla_gdn_fwd_ms", "fla_gdn_fwdbwd_ms", "fla_gdn_fwd_host_ms", "fla_gdn_fwdbwd_host_ms",
          "fla_gdn_fwd_graph_ms", "fla_gdn_fwdbwd_graph_ms"]


def host_ms(fn, n=20):
    """Mean host time to issue one call, the GPU kept busy meanwhile (no sync inside)."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) * 1e3 / n


def graph_ms(fn, calls=20, reps=10):
    """Median GPU time of one call, replayed from a CUDA graph of `calls` calls (L2 warm)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        graph.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / calls)
    del graph
    return statistics.median(times)


def time_shape(B, T, H, D):
    dev, bf = "cuda", torch.bfloat16
    q, k, v = (torch.randn(B, T, H, D, device=dev, dtype=bf, requires_grad=True) for _ in range(3))
    g = F.logsigmoid(torch.randn(B, T, H, device=dev)).requires_grad_()
    beta = torch.rand(B, T, H, device=dev, dtype=bf).sigmoid().requires_grad_()
    inputs = (q, k, v, g, beta)

    def fwd():
        return chunk_gated_delta_rule(q, k, v, g, beta, use_qk_l2norm_in_kernel=True)[0]

    do = torch.randn_like(fwd())

    def fwd_nograd():
        with torch.no_grad():
            return fwd()

    def fwdbwd():
        fwd().backward(do)

    def fwdbwd_grads():  # as fwdbwd, without accumulating into .grad (for the graph)
        return torch.autograd.grad(fwd(), inputs, do)

    r = {}
    with torch.no_grad():
        r["fla_gdn_fwd_ms"] = do_bench(fwd, warmup=50, rep=200, return_mode="median")
    r["fla_gdn_fwdbwd_ms"] = do_bench(fwdbwd, warmup=50, rep=300, return_mode="median", grad_to_none=list(inputs))
    r["fla_gdn_fwd_host_ms"] = host_ms(fwd_nograd)
    r["fla_gdn_fwdbwd_host_ms"] = host_ms(fwdbwd_grads)
    for name, fn in (("fla_gdn_fwd_graph_ms", fwd_nograd), ("fla_gdn_fwdbwd_graph_ms", fwdbwd_grads)):
        try:
            r[name] = graph_ms(fn)
        except Exception as e:  # reported, not hidden: the comparison then has no graph number
            print(f"B{B}_T{T}_H{H}_D{D}: {name} failed: {type(e).__name__}: {e}", flush=True)
    r["tokens"] = B * T
    return r


def profile(B, T, H, D):
    """One forward and one forward + backward inside the profiler's range, after autotuning."""
    dev, bf = "cuda", torch.bfloat16
    q, k, v = (torch.randn(B, T, H, D, device=dev, dtype=bf, requires_grad=True) for _ in range(3))
    g = F.logsigmoid(torch.randn(B, T, H, device=dev)).requires_grad_()
    beta = torch.rand(B, T, H, device=dev, dtype=bf).sigmoid().requires_grad_()

    def fwd():
        return chunk_gated_delta_rule(q, k, v, g, beta, use_qk_l2norm_in_kernel=True)[0]

    do = torch.randn_like(fwd())
    for _ in range(3):
        torch.autograd.grad(fwd(), (q, k, v, g, beta), do)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    with torch.no_grad():
        fwd()
    torch.autograd.grad(fwd(), (q, k, v, g, beta), do)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    print(f"profiled fla at B{B}_T{T}_H{H}_D{D}: one forward, one forward + backward", flush=True)


def main():
    if PROFILE_SHAPE:
        profile(*PROFILE_SHAPE)
        return
    out_dir = os.environ.get("OUT", ".")
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "fla_kernels.json")
    print("torch", torch.__version__, torch.cuda.get_device_name(), flush=True)
    results = {}
    if os.path.exists(path):
        with open(path) as f:
            results = json.load(f)
    for B, T, H, D in SHAPES:
        key = f"B{B}_T{T}_H{H}_D{D}"
        r = time_shape(B, T, H, D)
        print(key, {k_: round(x, 4) for k_, x in r.items()}, flush=True)
        entry = results.get(key, {})
        if not isinstance(entry.get("samples"), list):  # a file from an older run of this script: start over
            entry = {"samples": []}
        results[key] = entry
        entry["samples"].append(r)
        for f_ in FIELDS:  # the fastest sample per field (absent where every sample failed: JSON has no NaN)
            vals = [s[f_] for s in entry["samples"] if f_ in s]
            if vals:
                entry[f_] = min(vals)
        entry["tokens"] = B * T
        torch.cuda.empty_cache()
        # after every shape, so that a run cut short by its time limit still leaves numbers
        with open(path, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
