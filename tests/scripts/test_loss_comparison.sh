#!/usr/bin/env bash
# scripts/loss_comparison.sh and scripts/loss_report.py, without a GPU: the --dry-run plan (runs,
# default seeds, steps for --tokens, --gpus 8 through mpirun), bad options refused with a clear
# message, and the report of a synthetic run directory (its numbers, every planned model, the decode
# formulas, the corpus from its manifest, the maintainer's discussion, relative paths, and a real PNG).
# Usage: test_loss_comparison.sh [path/to/deltatron]  (with the binary: a CPU mini-run, twice, the
# second sitting finding every run finished).
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
bin=${1:-}
lc="$repo/scripts/loss_comparison.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
models=(softmax_124m gdn_124m hybrid_gqa_124m hybrid_mla_124m)

# Stand-in configs: the experiment configs' train keys (8 x 2 x 1024) on the quickstart model.
mkdir -p "$tmp/cfg"
for m in "${models[@]}"; do
  sed -e 's/batch_size: 16/batch_size: 8\n  grad_accum: 2/' -e 's/seq_len: 128/seq_len: 1024/' \
    "$repo/configs/quickstart.yaml" > "$tmp/cfg/$m.yaml"
done
plan() { "$lc" --dry-run --configs "$tmp/cfg" --out "$tmp/runs" --gpus 1 "$@"; }

# The default plan: 6 runs, seeds 1,2 for softmax and GDN, 1 for the hybrids; 100M / 16384 = 6103 steps.
out=$(plan) || fail "dry run failed: $out"
[[ $(grep -c '^  \[' <<< "$out") == 6 ]] || fail "expected 6 runs: $out"
for r in softmax_124m_s1 gdn_124m_s1 hybrid_gqa_124m_s1 hybrid_mla_124m_s1 softmax_124m_s2 gdn_124m_s2; do
  grep -q "\] $r " <<< "$out" || fail "run $r missing from the plan: $out"
done
grep -q "hybrid_gqa_124m_s2\|hybrid_mla_124m_s2" <<< "$out" && fail "a hybrid got seed 2 by default: $out"
grep -q "6 runs of 6103 steps x 16384 tokens = 99991552 tokens" <<< "$out" || fail "wrong steps for 100M: $out"
grep -q -- "--set train.steps=6103 --set train.seed=2" <<< "$out" || fail "seed 2 not passed: $out"
grep -q "435134 tokens/s (measured" <<< "$out" || fail "softmax's measured rate not used: $out"
grep -q "gdn_124m_s1 .*unknown: the slowest known rate" <<< "$out" || fail "gdn's unknown rate not said: $out"
grep -q "fineweb_val_\\\\\*.bin --batches 20 --json" <<< "$out" || fail "eval command missing: $out"

# --tokens with a suffix, explicit seeds for every model, 8 GPUs: 2.5B / 131072 = 19073 steps.
out=$(plan --tokens 2.5B --gpus 8 --models gdn_124m,hybrid_mla_124m --seeds 3) || fail "2.5B plan failed: $out"
grep -q "2 runs of 19073 steps x 131072 tokens" <<< "$out" || fail "wrong 8-GPU steps: $out"
grep -q "x 8 rank(s)" <<< "$out" || fail "global batch not stated: $out"
grep -q "launch.sh -n 8 -- .*train" <<< "$out" || fail "8 GPUs not through launch.sh/mpirun: $out"
grep -q "hybrid_mla_124m_s3" <<< "$out" || fail "--seeds 3 not applied to every model: $out"
grep -q "gdn_124m_s1" <<< "$out" && fail "--seeds 3 still ran seed 1: $out"
out=$(plan --tokens 1.5M --models softmax_124m --seeds 1) || fail "1.5M plan failed"
grep -q "1 runs of 91 steps" <<< "$out" || fail "1.5M should give 91 steps: $out"

# Bad options: exit 1 with "loss_comparison: error:" naming the problem.
expect_error() {  # expect_error "message part" args...
  local want=$1
  shift
  "$lc" --configs "$tmp/cfg" --out "$tmp/runs" "$@" > /dev/null 2> "$tmp/err"
  local rc=$?
  [[ $rc == 1 ]] || fail "$*: exit $rc, expected 1"
  grep -q "loss_comparison: error: .*$want" "$tmp/err" || { echo "$*: wrong message (want '$want'):"; cat "$tmp/err"; exit 1; }
}
expect_error "--tokens 'lots'" --dry-run --tokens lots
expect_error "--tokens '2.5555K'" --dry-run --tokens 2.5555K
expect_error "less than one step" --dry-run --tokens 1000
expect_error "unknown model 'mamba'" --dry-run --models softmax_124m,mamba
expect_error "names a model twice" --dry-run --models gdn_124m,gdn_124m
expect_error "--seeds '1,x'" --dry-run --seeds 1,x
expect_error "--gpus '0'" --dry-run --gpus 0
expect_error "--time-limit" --dry-run --time-limit soon
expect_error "--device 'tpu'" --dry-run --device tpu
expect_error "unknown option '--bogus'" --dry-run --bogus
expect_error "--tokens needs a value" --dry-run --tokens
expect_error "train.steps comes from --tokens" --dry-run --set train.steps=5
expect_error "not KEY=VALUE" --dry-run --set train.lr
expect_error "softmax_124m.yaml' is missing" --dry-run --configs "$tmp/none"
expect_error "deltatron binary '$tmp/nobin'" --gpus 1 --device cpu --deltatron "$tmp/nobin"
expect_error "no training shards" --gpus 1 --device cpu --deltatron /bin/true --data "$tmp/noshards"
DELTATRON_COMMIT=notahash expect_error "DELTATRON_COMMIT 'notahash' is not HASH or HASH-dirty" --dry-run --gpus 1
sed -i 's/batch_size: 8/batch_size: 4/' "$tmp/cfg/gdn_124m.yaml"
expect_error "differs from softmax_124m's" --dry-run --gpus 1
sed -i 's/batch_size: 4/batch_size: 8/' "$tmp/cfg/gdn_124m.yaml"

# The report of a synthetic comparison.
runs="$tmp/synth"
mkdir -p "$runs/info"
cat > "$runs/plan.json" << 'EOF'
{"invocation": "scripts/loss_comparison.sh --tokens 48K --models gdn_124m --seeds 2 --deltatron /tmp/xbin/deltatron --time-limit 500",
 "commit": "0123abc", "dirty": true, "gpu": "NVIDIA H200", "ranks": 1, "global_batch_tokens": 16384,
 "global_batch": "8 x 2 x 1024 x 1", "tokens": 49152, "steps": 3, "configs": "/elsewhere/root/configs/experiments"}
EOF
# A manifest of scripts/build_corpus.py's form: 24,576 training tokens, so 49,152 seen are 2 passes.
cat > "$runs/corpus_manifest.json" << 'EOF'
{"description": "test corpus", "seed": 1,
 "cleaning": {"selection": "HTML pages first", "html": "html.parser; <pre> lines kept", "repeated_lines": "lines in >= 10 pages removed",
              "page_filters": ">= 50 words", "dedup": "exact and MinHash",
              "removed": {"repeated_lines": 1234, "repeated_line_chars": 56789, "pages_too_short": 7, "pages_not_english": 2,
                          "pages_exact_duplicates": 3, "pages_near_duplicates": 4}},
 "inputs": {"fineweb": {"path": "assets/fineweb/fineweb_legal_subset.jsonl.xz", "sha256": "00"}},
 "packages": [{"package": "numpy-doc", "version": "1:2.1.0-1", "deb_sha256": "feedc0de", "kept_tokens": 20000},
              {"package": "tiny-doc", "version": "0.1", "deb_sha256": "deadbeef", "kept_tokens": 76},
              {"package": "wee-doc", "version": "0.2", "deb_sha256": "beadfeed", "kept_tokens": 100}],
 "outputs": {"train.jsonl": {"bytes": 1, "sha256": "aaaa1111", "total": {"documents": 30, "tokens": 24576},
                             "by_source": {"debian:numpy-doc": {"documents": 20, "tokens": 20000},
                                           "fineweb": {"documents": 8, "tokens": 4400},
                                           "debian:tiny-doc": {"documents": 1, "tokens": 76},
                                           "debian:wee-doc": {"documents": 1, "tokens": 100}}},
             "val_fineweb_edu.jsonl": {"sha256": "bbbb2222", "total": {"documents": 5, "tokens": 3000},
                                       "by_source": {"fineweb_edu": {"documents": 5, "tokens": 3000}}}}}
EOF
fake_run() {  # fake_run name headline_loss rate1 rate2 rate3 peak wall1 wall2
  local d="$runs/$1"
  mkdir -p "$d"
  cat > "$d/metrics.jsonl" << EOF
{"step": 1, "loss": 10.0, "tokens": 16384, "tokens_per_s": $3, "peak_mem_gib": 1.0}
{"step": 2, "loss": 8.0, "tokens": 32768, "tokens_per_s": $4, "peak_mem_gib": $6}
{"step": 2, "val_loss": 7.5, "tokens": 32768}
{"step": 3, "loss": 6.0, "tokens": 49152, "tokens_per_s": $5}
{"step": 3, "val_loss": $2, "tokens": 49152}
EOF
  printf '%s\n' "{\"start\": \"2026-12-02T10:00:00Z\", \"end\": \"2026-12-02T10:01:00Z\", \"wall_s\": $7, \"command\": \" /tmp/xbin/deltatron train --config /elsewhere/root/configs/experiments/${1%_s*}.yaml --set data.train=$repo/shards/comparison/corpus_train_*.bin\"}" \
    "{\"start\": \"2026-12-02T11:00:00Z\", \"end\": \"2026-12-02T11:02:00Z\", \"wall_s\": $8, \"command\": \"deltatron train B\"}" > "$d/sittings.jsonl"
  echo '{"steps": 3, "tokens": 49152}' > "$d/finished.json"
  cat > "$d/eval.json" << EOF
{"checkpoint": "$d/checkpoints/step_00000003.h5", "step": 3, "batches_requested": 20, "sets": {
 "fineweb_edu": {"checkpoint": "$d/checkpoints/step_00000003.h5", "val_loss": $2, "batches": 20, "tokens": 163840, "data": "x/fineweb_edu_val_*.bin"},
 "fineweb": {"val_loss": $(python3 -c "print($2 + 0.5)"), "batches": 20, "tokens": 163840, "data": "x/fineweb_val_*.bin"},
 "docs": {"val_loss": $(python3 -c "print($2 + 1)"), "batches": 7, "tokens": 57344, "data": "x/docs_val_*.bin"}}}
EOF
}
fake_run softmax_124m_s1 3.50 100 200 300 1.5 100 50
fake_run softmax_124m_s2 3.52 100 200 300 1.25 60 0
fake_run gdn_124m_s1 3.40 400 500 600 2.0 30 30
fake_run gdn_124m_s2 3.44 400 500 600 2.0 30 30
fake_run hybrid_mla_124m_s1 3.60 50 60 70 1.0 10 10
# gdn_124m_s2 was trained at another commit, with a clean tree: the report names both commits.
sed -i 's/^{"start"/{"commit": "bbb2222", "dirty": false, "start"/' "$runs/gdn_124m_s2/sittings.jsonl"
cat > "$runs/softmax_124m_s1/config.yaml" << 'EOF'
model: {layers: "[attn] * 12", attn: {n_kv_heads: 12, head_dim: 64}}
EOF
cat > "$runs/gdn_124m_s1/config.yaml" << 'EOF'
model: {layers: "[gdn] * 12", gdn: {n_v_heads: 12, head_k_dim: 64, head_v_dim: 64}}
EOF
cat > "$runs/hybrid_mla_124m_s1/config.yaml" << 'EOF'
model: {layers: "[gdn, gdn, gdn, mla] * 3", gdn: {n_v_heads: 12, head_k_dim: 64, head_v_dim: 64},
        mla: {kv_lora_rank: 256, qk_rope_head_dim: 32}}
EOF
echo '{"config": "s.yaml", "layers": ["attn", "attn", "attn", "attn", "attn", "attn", "attn", "attn", "attn", "attn", "attn", "attn"], "parameters": 124000123,
 "decode": {"state_bytes_per_sequence": 0, "cache_bytes_per_token": 36864,
 "bytes_per_sequence": {"1024": 37748736, "8192": 301989888, "32768": 1207959552, "131072": 4831838208}}}' \
  > "$runs/info/softmax_124m.json"
# A stand-in deltatron whose `info` knows hybrid_gqa_124m only (the numbers of the real config).
cat > "$tmp/fakebin" << 'EOF'
#!/usr/bin/env bash
[[ $1 == info && $2 == */hybrid_gqa_124m.yaml ]] || exit 1
echo '{"layers": ["gdn","gdn","gdn","attn","gdn","gdn","gdn","attn","gdn","gdn","gdn","attn"], "parameters": 130915224,
 "decode": {"bytes_per_sequence": {"1024": 11331072, "8192": 77391360, "32768": 303883776, "131072": 1209853440}}}'
EOF
chmod +x "$tmp/fakebin"
md="$tmp/doc/lc.md"
out=$("$lc" --report-only --out "$runs" --report "$md" --deltatron "$tmp/fakebin" 2> "$tmp/report.err") ||
  fail "--report-only failed: $out $(cat "$tmp/report.err")"
[[ -s $md ]] || fail "no report written"
head -c 8 "$tmp/doc/lc.png" | od -An -c | grep -q "P   N   G" || fail "the PNG is not a PNG"
check() { grep -qF -- "$1" "$md" || { echo "report lacks: $1"; cat "$md"; exit 1; }; }
check "| softmax_124m | 1,2 | 3.5100 ± 0.0100 | +0.00% | 4.0100 ± 0.0100 | +0.00% | 4.5100 ± 0.0100 | +0.00% |"
check "| gdn_124m | 1,2 | 3.4200 ± 0.0200 | -2.56% | 3.9200 ± 0.0200 | -2.24% | 4.4200 ± 0.0200 | -2.00% |"
check "| hybrid_mla_124m | 1 | 3.6000 | +2.56% |"
# Every model of the plan appears; hybrid_gqa_124m has no run, and the missing run of the default plan
# is named with the command that completes it (the invocation without --models, --seeds, --time-limit).
check "| hybrid_gqa_124m | not run yet | – | – |"
check "| hybrid_gqa_124m | 130,915,224 | not run yet | | | |"
check "Runs finished: 5 of the 6 of the default plan; still missing: \`hybrid_gqa_124m_s1\`"
check "1 of them have not finished: \`hybrid_gqa_124m_s1\`"
grep -qx "scripts/loss_comparison.sh --tokens 48K --out runs/loss_comparison" "$md" || fail "no completion command: $(cat "$md")"
check "| softmax_124m | 124,000,123 | 49,152, 49,152 | 200 | 1.50 | 0h02m30s, 0h01m00s |"
check "| gdn_124m | n/a | 49,152, 49,152 | 500 | 2.00 | 0h01m00s, 0h01m00s |"
check "- Commits: \`0123abc\` (softmax_124m_s1, softmax_124m_s2, gdn_124m_s1, hybrid_mla_124m_s1) (working tree dirty: uncommitted changes to tracked files); \`bbb2222\` (gdn_124m_s2)"
check "docs: 7 batches, 57,344 tokens"
check "Evaluation batches asked: 20"
# Decode memory: all four models; the formulas at deltatron's element sizes (GDN state 4 B, caches 2 B),
# the GDN convolution tail as the remaining difference, the share of softmax at 32K.
check "| softmax_124m | 12 attn | deltatron info | 36.00 MiB | 288.00 MiB | 1.12 GiB | 4.50 GiB | 100.0% | |"
check "| | | formula | 36.00 MiB | 288.00 MiB | 1.12 GiB | 4.50 GiB | 100.0% | 2·L·t·d = 2·12·t·768 (×2 B) |"
check "| | | formula | 2.25 MiB | 2.25 MiB | 2.25 MiB | 2.25 MiB | 0.2% | L·H·d_k·d_v = 12·12·64·64 (×4 B) |"
check "L·H·d_k·d_v = 9·12·64·64 (×4 B) + L·t·(d_c + d_rope) = 3·t·288 (×2 B)"
check "| hybrid_gqa_124m | 3 attn, 9 gdn | deltatron info | 10.81 MiB | 73.81 MiB | 289.81 MiB | 1.13 GiB | 25.2% | |"
check "| | | formula | 10.69 MiB | 73.69 MiB | 289.69 MiB | 1.13 GiB | 25.1% |"
check "| | | info − formula | 121.50 KiB | 121.50 KiB | 121.50 KiB | 121.50 KiB | | conv tail L·(k−1)·(2·H_k·d_k + H·d_v) = 9·3·2304 (×2 B): the same |"
check "fp32 (4 B)"
# The corpus in brief, from the manifest.
check "This is not FineWeb-Edu-2.5B"
check "82.1% Debian technical documentation (3 packages, 20,176 tokens) and 4,400 tokens of a legal-leaning FineWeb subset"
check "sees the training corpus 2.00 times"
check "| \`train.jsonl\` | training | 30 | 24,576 | \`aaaa1111\` |"
check "| \`val_fineweb_edu.jsonl\` | held-out (headline) | 5 | 3,000 | \`bbbb2222\` |"
check "| numpy-doc | 20 | 20,000 | 81.4% |"
check "| FineWeb (legal-leaning subset) | 8 | 4,400 | 17.9% |"
check "| other (2 packages) | 2 | 176 | 0.7% |"
check "numpy-doc=1:2.1.0-1, tiny-doc=0.1, wee-doc=0.2"
check "&lt;pre> lines kept"
check "(3 exact and 4 near duplicates dropped)"
check "[docs/corpus.md]("
grep -q "feedc0de\|deb_sha256\|\`outputs\`" "$md" && fail "the manifest is dumped: $(cat "$md")"
# No discussion beside the report: said so.
check "No discussion has been written yet: the report inserts \`$tmp/doc/lc_discussion.md\`"
check "0123abc"
check "dirty"
check "NVIDIA H200"
check "deltatron train B"
# Paths relative to the repository root (this checkout's and the recorded one), the binary as build/deltatron.
check "build/deltatron train --config configs/experiments/softmax_124m.yaml --set data.train=shards/comparison/corpus_train_*.bin"
check "scripts/loss_comparison.sh --tokens 48K --models gdn_124m --seeds 2 --deltatron build/deltatron --time-limit 500"
grep -q "/tmp/xbin\|/elsewhere/root\|$repo/" "$md" && fail "absolute paths left: $(grep "/tmp/xbin\|/elsewhere/root\|$repo/" "$md")"
check "deltatron eval --checkpoint $runs/softmax_124m_s2/checkpoints/step_00000003.h5 --data 'x/docs_val_*.bin' --batches 20 --json"
[[ $(grep -o '^- `[a-z0-9_]*_s[0-9]*`' "$md" | tr -d '` -' | paste -sd,) == softmax_124m_s1,softmax_124m_s2,gdn_124m_s1,gdn_124m_s2,hybrid_mla_124m_s1 ]] ||
  fail "runs not in model and seed order: $(grep '^- `' "$md")"
check "--batches 20 --json"
check "scripts/loss_comparison.sh --tokens 2.5B --gpus 8"
check "python3 scripts/prepare_fineweb_edu.py"
check "| hybrid_mla_124m | 1 | 60 | these runs' median | 1446h46m33s | 1446h46m33s |"
# 2.5B tokens at 8 x 200 tokens/s + 60 s, two seeds; at 8 x 500 for GDN; hybrid_gqa has no run.
check "| softmax_124m | 2 | 200 | these runs' median | 434h02m40s | 868h05m20s |"
check "| gdn_124m | 2 | 500 | these runs' median | 173h37m40s | 347h15m20s |"
# The maintainer's discussion, inserted as it is: beside the report by default, or --discussion FILE.
printf '**Hand-written.** GDN wins here.\n' > "$tmp/doc/lc_discussion.md"
"$lc" --report-only --out "$runs" --report "$md" > /dev/null || fail "report with a discussion failed"
check "**Hand-written.** GDN wins here."
grep -q "No discussion has been written" "$md" && fail "discussion beside the report not used"
printf 'Other text.\n' > "$tmp/disc.md"
"$lc" --report-only --out "$runs" --report "$md" --discussion "$tmp/disc.md" > /dev/null || fail "--discussion failed"
check "Other text."
"$lc" --report-only --out "$tmp/nothing" --report "$md" > /dev/null 2> "$tmp/err" && fail "--report-only on a missing dir"
grep -q "loss_comparison: error: --report-only" "$tmp/err" || fail "wrong message: $(cat "$tmp/err")"
echo "loss_comparison: plan, errors and report checked"

# A CPU mini-run with the binary: two models, 3 steps of 2 x 2 x 32 tokens on the bundled sample.
[[ -n $bin ]] || exit 0
data="$tmp/shards"
"$bin" prepare --input "$repo/assets/fineweb-edu/fineweb_edu.jsonl" --out "$tmp/prep" --val-docs 20 --threads 1 \
  > /dev/null 2>&1 || fail "deltatron prepare failed on the bundled sample"
mkdir -p "$data"
cp "$tmp/prep/fineweb_edu_train_000001.bin" "$data/corpus_train_000001.bin"
for s in fineweb_edu fineweb docs; do cp "$tmp/prep/fineweb_edu_val_000000.bin" "$data/${s}_val_000000.bin"; done
# One manifest per copied set (data/manifest.h), as scripts/prepare_comparison_data.sh leaves them.
python3 - "$data" <<'PY'
import glob, hashlib, json, os, re, sys
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.bin"))):
    file = os.path.basename(path)
    name = re.sub(r"_(train|val)_\d+\.bin$", "", file)
    shard = {"file": file, "tokens": (os.path.getsize(path) - 1024) // 2,
             "sha256": hashlib.sha256(open(path, "rb").read()).hexdigest()}
    m = {"format": "deltatron-shard-set", "version": 1, "name": name, "shards": [shard],
         "tokenizer": {"encoder.json_sha256": "", "vocab.bpe_sha256": ""}, "inputs": []}
    with open(os.path.join(sys.argv[1], name + ".manifest.json"), "w") as f:
        json.dump(m, f)
PY
for m in softmax_124m gdn_124m; do
  sed -i -e 's/batch_size: 8/batch_size: 2/' -e 's/seq_len: 1024/seq_len: 32/' -e 's/checkpoint_every: 75/checkpoint_every: 2/' \
    -e 's/eval_every: 50/eval_every: 2/' -e 's/warmup_steps: 10/warmup_steps: 1/' -e 's/eval_batches: 4/eval_batches: 2/' "$tmp/cfg/$m.yaml"
done
mini() {
  "$lc" --configs "$tmp/cfg" --out "$tmp/mini" --data "$data" --deltatron "$bin" --device cpu --gpus 1 \
    --models softmax_124m,gdn_124m --seeds 1 --tokens 384 --eval-batches 2 --set run.threads=1 \
    --corpus-manifest "$runs/corpus_manifest.json" --report "$tmp/mini_doc/lc.md" "$@"
}
DELTATRON_COMMIT=abc1234-dirty mini > "$tmp/mini1.out" 2>&1 || { cat "$tmp/mini1.out"; fail "the first mini sitting failed"; }
# DELTATRON_COMMIT is recorded instead of this checkout's git HEAD.
python3 -c 'import json, sys; p = json.load(open(sys.argv[1])); s = json.loads(open(sys.argv[2]).readline())
assert (p["commit"], p["dirty"], s["commit"], s["dirty"]) == ("abc1234", True, "abc1234", True), (p, s)' \
  "$tmp/mini/plan.json" "$tmp/mini/softmax_124m_s1/sittings.jsonl" || fail "DELTATRON_COMMIT not recorded"
for r in softmax_124m_s1 gdn_124m_s1; do
  d="$tmp/mini/$r"
  [[ -s $d/finished.json && -s $d/eval.json && -s $d/checkpoints/step_00000003.h5 ]] || fail "$r: not finished"
  [[ $(wc -l < "$d/sittings.jsonl") == 1 ]] || fail "$r: expected one sitting"
  python3 -c 'import json, sys; e = json.load(open(sys.argv[1]))
assert e["step"] == 3 and sorted(e["sets"]) == ["docs", "fineweb", "fineweb_edu"], e
assert all(v["batches"] == 2 for v in e["sets"].values()), e' "$d/eval.json" || fail "$r: bad eval.json"
done
grep -q "all 2 runs finished" "$tmp/mini1.out" || fail "no final line: $(cat "$tmp/mini1.out")"
grep -q "| gdn_124m | 1 | [0-9.]* | [-+][0-9.]*% |" "$tmp/mini_doc/lc.md" || fail "mini report: $(cat "$tmp/mini_doc/lc.md")"
# The second sitting finds both finished and trains nothing.
mini > "$tmp/mini2.out" 2>&1 || { cat "$tmp/mini2.out"; fail "the second mini sitting failed"; }
[[ $(grep -c "finished  *est 0h00m00s" "$tmp/mini2.out") == 2 ]] || fail "second sitting: $(cat "$tmp/mini2.out")"
grep -q "deltatron train\|step 1/3" "$tmp/mini2.out" && fail "second sitting trained again: $(cat "$tmp/mini2.out")"
# An unfinished run (the last checkpoint and the markers gone) resumes from step 2 in a new sitting.
d="$tmp/mini/gdn_124m_s1"
rm "$d/finished.json" "$d/eval.json" "$d/checkpoints/step_00000003.h5"
mini > "$tmp/mini3.out" 2>&1 || { cat "$tmp/mini3.out"; fail "the resuming sitting failed"; }
grep -q "gdn_124m_s1 *resume at step 2" "$tmp/mini3.out" || fail "no resume: $(cat "$tmp/mini3.out")"
[[ -s $d/finished.json && $(wc -l < "$d/sittings.jsonl") == 2 ]] || fail "resumed run not finished in a second sitting"
# --time-limit shorter than the next run's estimate launches nothing and exits 3.
rm "$d/finished.json"
mini --time-limit 5 > "$tmp/mini4.out" 2>&1
rc=$?
[[ $rc == 3 ]] || fail "--time-limit 5: exit $rc, expected 3: $(cat "$tmp/mini4.out")"
grep -q "stopping: gdn_124m_s1 needs about" "$tmp/mini4.out" || fail "no stop message: $(cat "$tmp/mini4.out")"
[[ -e $d/finished.json || $(wc -l < "$d/sittings.jsonl") != 2 ]] && fail "--time-limit still ran gdn_124m_s1"
# Another --tokens against finished runs is refused.
mini --tokens 512 --dry-run > /dev/null 2> "$tmp/err" && fail "other --tokens over finished runs accepted"
grep -q "finished with other steps" "$tmp/err" || fail "wrong message: $(cat "$tmp/err")"
echo "loss_comparison: CPU mini-run, skip and resume checked"
