"""The training-step table of one device call: ours (bench_train's JSON) against the peers
(bench_train_peers.py's train_peers.json), measured in the same call by scripts/gpu_check.sh.
  python3 bench/report_train.py OUT_DIR       # prints the table, writes OUT_DIR/train_report.json
"""
import json
import os
import sys

out = sys.argv[1] if len(sys.argv) > 1 else "."


def load(name):
    p = os.path.join(out, name)
    return json.load(open(p)) if os.path.exists(p) else None


ours = {n: load(f"train_{n}.json") for n in ("softmax_llama_arch", "softmax", "hybrid")}
peers = load("train_peers.json") or {}
rows = []
print(f"{'model':34s} {'params':>8s} {'step ms':>8s} {'tokens/s':>10s} {'MFU':>6s} {'peak GiB':>9s}")
for n, r in ours.items():
    if r:
        print(f"{'deltatron ' + r['name']:34s} {r['params']/1e6:7.1f}M {r['step_ms']:8.2f} {r['tok_per_s']:10.0f} "
              f"{100*r['mfu']:5.1f}% {r['peak_mem_gib']:9.2f}")
for n, r in peers.items():
    if isinstance(r, dict):
        print(f"{n:34s} {r['params']/1e6:7.1f}M {r['step_ms']:8.2f} {r['tok_per_s']:10.0f} {'':>6s} {r['peak_mem_gib']:9.2f}")
    else:
        print(f"{n:34s} {r}")

ratios = {}
def ratio(a, b, label):
    if a and isinstance(b, dict):
        ratios[label] = a["tok_per_s"] / b["tok_per_s"]
        print(f"{label:64s} {ratios[label]:.2f}x")

print()
ratio(ours["softmax_llama_arch"], peers.get("hf_llama_softmax_124m_compiled"), "softmax (Llama architecture) vs HF Llama + torch.compile")
ratio(ours["softmax_llama_arch"], peers.get("hf_llama_softmax_124m_eager"), "softmax (Llama architecture) vs HF Llama eager")
ratio(ours["softmax"], peers.get("hf_llama_softmax_124m_compiled"), "softmax (gated, q/k norm, untied) vs HF Llama + torch.compile")
ratio(ours["hybrid"], peers.get("fla_gdn_hybrid_3to1_124m_eager"), "hybrid 3:1 vs fla GDN hybrid 3:1 eager")
json.dump({"ours": ours, "peers": peers, "ratios": ratios}, open(os.path.join(out, "train_report.json"), "w"), indent=1)
