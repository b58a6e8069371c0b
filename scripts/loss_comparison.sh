#!/usr/bin/env bash
# The GDN-versus-softmax loss comparison in one command: trains each model of
# configs/experiments/ for the same number of tokens, evaluates the final checkpoints on the three
# held-out sets, and writes the report (scripts/loss_report.py).
#
#   scripts/loss_comparison.sh [options]
#
#   --tokens N          training tokens per run (default 100000000; suffixes K, M, B: 100M, 2.5B)
#   --models LIST       comma list of softmax_124m, gdn_124m, hybrid_gqa_124m, hybrid_mla_124m
#                       (default: all four)
#   --seeds LIST        comma list of seeds for every model (default: 1,2 for softmax_124m and
#                       gdn_124m, 1 for the hybrids)
#   --out DIR           run directories, one per model and seed: DIR/<model>_s<seed>/
#                       (default runs/loss_comparison)
#   --data DIR          shards: corpus_train_*.bin and the held-out fineweb_edu_val_*.bin (the
#                       headline), fineweb_val_*.bin, docs_val_*.bin (default shards/comparison)
#   --corpus-manifest F the corpus's MANIFEST.json (sources, packages, SHA-256s, token counts);
#                       copied to DIR/corpus_manifest.json for the report
#   --deltatron BIN     the deltatron binary (default build/deltatron)
#   --configs DIR       the model configs, DIR/<model>.yaml (default configs/experiments)
#   --throughput FILE   measured tokens/s for the estimates (default configs/experiments/throughput.json)
#   --gpus N            data-parallel ranks (default: the GPUs `nvidia-smi -L` lists); with N > 1 each
#                       model trains on all N at once through mpirun (scripts/launch.sh), one model
#                       after the other
#   --device D          cuda (default), cpu or auto: passed to deltatron train and eval
#   --eval-batches N    batches of each held-out set per evaluation (default 20, or what the set holds)
#   --time-limit S      launch no run whose estimated time no longer fits in S seconds from the start
#   --report FILE       the report (default docs/experiments/loss_comparison.md; the PNG goes beside it)
#   --discussion FILE   the maintainer's discussion, inserted into the report where it exists (default
#                       the report's name with _discussion.md: docs/experiments/loss_comparison_discussion.md)
#   --set KEY=VALUE     passed on to deltatron train (repeatable); train.steps, train.seed and data.*
#                       come from --tokens, --seeds and --data
#   --dry-run           print the plan (runs, steps, commands, estimated times) and exit; needs no
#                       GPU, shards or binary
#   --report-only       only regenerate the report from DIR (with --corpus-manifest, read from F; with
#                       the binary, `deltatron info` of the models that DIR/info/ lacks)
#   -h, --help
#
# train.steps = tokens / global batch, the global batch being train.batch_size x train.grad_accum x
# train.seq_len x ranks from the config (the same for every model, or it is an error); the tokens
# seen are steps x global batch. Runs go seed by seed (every model's seed 1 first).
# Resumable: run it again and each unfinished run continues from its newest checkpoint, finished
# runs (DIR/<run>/finished.json, written after training and evaluation) are skipped, and each
# sitting is appended to DIR/<run>/sittings.jsonl (start, end, wall seconds, host, commit).
# The commit recorded in DIR/plan.json and the sittings is `git rev-parse HEAD` and whether tracked
# files differ from it; where the checkout's .git is not the source of the working tree (a copy sent to
# a GPU host), set DELTATRON_COMMIT=HASH or HASH-dirty and that is recorded instead.
# Exit status: 0 every run finished, 3 --time-limit left runs for a later sitting, 1 an error.
#
# Examples:
#   scripts/loss_comparison.sh --dry-run
#   scripts/loss_comparison.sh --corpus-manifest data_out/corpus/MANIFEST.json --time-limit 540
#   scripts/loss_comparison.sh --tokens 2.5B --gpus 8 --dry-run
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
die() { echo "loss_comparison: error: $*" >&2; exit 1; }
say() { echo "loss_comparison: $*"; }

repo=$(cd "$(dirname "$0")/.." && pwd)
all_models=(softmax_124m gdn_124m hybrid_gqa_124m hybrid_mla_124m)
held_out=(fineweb_edu fineweb docs)  # the first is the headline set, also data.val during training
overhead_s=60  # estimated start-up, checkpoint and evaluation seconds of a run, beside its steps

tokens_arg=100000000 models_arg="" seeds_arg="" out="$repo/runs/loss_comparison" data="$repo/shards/comparison"
manifest="" bin="$repo/build/deltatron" configs="$repo/configs/experiments"
throughput="$repo/configs/experiments/throughput.json" gpus="" device=cuda eval_batches=20 time_limit=""
report="$repo/docs/experiments/loss_comparison.md" discussion="" dry_run=0 report_only=0 sets=()
invocation="scripts/loss_comparison.sh$(printf ' %q' "$@")"

need() { (($# >= 2)) || die "$1 needs a value (see --help)"; }
while (($#)); do
  case $1 in
    --tokens) need "$@"; tokens_arg=$2; shift 2 ;;
    --models) need "$@"; models_arg=$2; shift 2 ;;
    --seeds) need "$@"; seeds_arg=$2; shift 2 ;;
    --out) need "$@"; out=$2; shift 2 ;;
    --data) need "$@"; data=$2; shift 2 ;;
    --corpus-manifest) need "$@"; manifest=$2; shift 2 ;;
    --deltatron) need "$@"; bin=$2; shift 2 ;;
    --configs) need "$@"; configs=$2; shift 2 ;;
    --throughput) need "$@"; throughput=$2; shift 2 ;;
    --gpus) need "$@"; gpus=$2; shift 2 ;;
    --device) need "$@"; device=$2; shift 2 ;;
    --eval-batches) need "$@"; eval_batches=$2; shift 2 ;;
    --time-limit) need "$@"; time_limit=$2; shift 2 ;;
    --report) need "$@"; report=$2; shift 2 ;;
    --discussion) need "$@"; discussion=$2; shift 2 ;;
    --set) need "$@"; sets+=("$2"); shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    --report-only) report_only=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done

if [[ -n ${DELTATRON_COMMIT:-} ]]; then
  [[ $DELTATRON_COMMIT =~ ^([0-9a-f]{7,40})(-dirty)?$ ]] ||
    die "DELTATRON_COMMIT '$DELTATRON_COMMIT' is not HASH or HASH-dirty (git rev-parse HEAD, plus -dirty)"
fi

report_cmd=(python3 "$repo/scripts/loss_report.py" --out "$out" --report "$report" --throughput "$throughput"
            --configs "$configs")
[[ -x $bin ]] && report_cmd+=(--deltatron "$bin")
[[ -n $discussion ]] && report_cmd+=(--discussion "$discussion")
if ((report_only)); then
  [[ -d $out ]] || die "--report-only: '$out' is not a directory; pass the --out of the runs"
  [[ -z $manifest ]] || report_cmd+=(--manifest "$manifest")
  exec "${report_cmd[@]}"
fi

# A count with an optional K/M/B/T suffix and decimals that the suffix absorbs: 2.5B -> 2500000000.
parse_count() {
  [[ $1 =~ ^([0-9]+)(\.([0-9]+))?([kKmMbBgGtT]?)$ ]] || return 1
  local int=${BASH_REMATCH[1]} frac=${BASH_REMATCH[3]} exp=0
  case ${BASH_REMATCH[4]} in k|K) exp=3 ;; m|M) exp=6 ;; b|B|g|G) exp=9 ;; t|T) exp=12 ;; esac
  ((${#frac} <= exp)) || return 1
  local digits=$int$frac i
  for ((i = ${#frac}; i < exp; i++)); do digits+=0; done
  echo $((10#$digits))
}
is_pos_int() { [[ $1 =~ ^[1-9][0-9]*$ ]]; }

tokens=$(parse_count "$tokens_arg") && ((tokens > 0)) ||
  die "--tokens '$tokens_arg' is not a positive count; give e.g. 100000000, 100M or 2.5B"
models=()
IFS=, read -r -a models <<< "${models_arg:-$(IFS=,; echo "${all_models[*]}")}"
((${#models[@]})) || die "--models is empty; give a comma list of: ${all_models[*]}"
for m in "${models[@]}"; do
  [[ " ${all_models[*]} " == *" $m "* ]] || die "--models: unknown model '$m'; the models are: ${all_models[*]}"
done
[[ $(printf '%s\n' "${models[@]}" | sort | uniq -d) == "" ]] || die "--models '$models_arg' names a model twice"
if [[ -n $seeds_arg ]]; then
  [[ $seeds_arg =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--seeds '$seeds_arg' is not a comma list of seeds, e.g. 1,2"
  [[ $(tr , '\n' <<< "$seeds_arg" | sort | uniq -d) == "" ]] || die "--seeds '$seeds_arg' names a seed twice"
fi
[[ -z $gpus ]] || is_pos_int "$gpus" || die "--gpus '$gpus' is not a positive number of GPUs"
is_pos_int "$eval_batches" || die "--eval-batches '$eval_batches' is not a positive number of batches"
[[ -z $time_limit ]] || is_pos_int "$time_limit" || die "--time-limit '$time_limit' is not a positive number of seconds"
[[ $device =~ ^(cuda|cpu|auto)$ ]] || die "--device '$device' is not cuda, cpu or auto"
for s in "${sets[@]}"; do
  [[ $s == *=* ]] || die "--set '$s' is not KEY=VALUE, e.g. --set train.lr=3e-4"
  case ${s%%=*} in
    train.steps) die "--set $s: train.steps comes from --tokens" ;;
    train.seed) die "--set $s: train.seed comes from --seeds" ;;
    data.*) die "--set $s: the data come from --data DIR" ;;
  esac
done
[[ -r $throughput ]] || die "cannot read the throughput file '$throughput'; pass --throughput FILE"
for m in "${models[@]}"; do
  [[ -r $configs/$m.yaml ]] || die "config '$configs/$m.yaml' is missing; the experiment configs live in" \
    "configs/experiments/, or pass --configs DIR"
done

# Data-parallel ranks: every GPU here, unless --gpus says otherwise.
if [[ -z $gpus ]]; then
  gpus=0
  if [[ $device != cpu ]] && command -v nvidia-smi > /dev/null 2>&1; then
    gpus=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU' || true)
  fi
  if ((gpus == 0)); then
    ((dry_run)) || [[ $device != cuda ]] ||
      die "no GPU found (nvidia-smi -L lists none); run on a GPU machine, plan with --dry-run --gpus N," \
        "or pass --device cpu for a CPU smoke run"
    gpus=1
  fi
fi
ranks=$gpus

# Each model's batch_size, grad_accum and seq_len (its config with the train.* --set values over it).
batches=$(python3 - "${#sets[@]}" "${sets[@]}" "${models[@]/#/$configs/}" << 'PY'
import sys, yaml
n = int(sys.argv[1])
sets, configs = sys.argv[2:2 + n], sys.argv[2 + n:]
for path in configs:
    try:
        with open(path + ".yaml") as f:
            train = dict((yaml.safe_load(f) or {}).get("train") or {})
    except (OSError, yaml.YAMLError, AttributeError) as e:
        sys.exit(f"loss_comparison: error: cannot read {path}.yaml as a config: {e}")
    for s in sets:
        key, value = s.split("=", 1)
        if key.startswith("train."):
            train[key[6:]] = yaml.safe_load(value)
    # deltatron's defaults (docs/config.md) for the keys a config leaves out
    print(train.get("batch_size", 16), train.get("grad_accum", 1), train.get("seq_len", 1024))
PY
) || exit 1
global="" batch_words="" i=0
while read -r b a t; do
  m=${models[i++]} g=$((b * a * t * ranks))
  if [[ -z $global ]]; then
    global=$g batch_words="$b sequences x $a accumulation x $t tokens x $ranks rank(s)"
  elif ((g != global)); then
    die "$m's global batch ($b x $a x $t x $ranks = $g tokens) differs from ${models[0]}'s ($global);" \
      "the comparison needs the same batch for every model: fix train.* in $configs"
  fi
done <<< "$batches"
steps=$((tokens / global))
((steps > 0)) || die "--tokens $tokens is less than one step ($global tokens: $batch_words)"

# The runs, seed by seed, so that a partial budget has trained every model once first.
runs=() run_model=() run_seed=()
seed_list() {
  if [[ -n $seeds_arg ]]; then tr , ' ' <<< "$seeds_arg"
  elif [[ $1 == softmax_124m || $1 == gdn_124m ]]; then echo 1 2
  else echo 1; fi
}
all_seeds=$(for m in "${models[@]}"; do seed_list "$m" | tr ' ' '\n'; done | sort -nu)
for s in $all_seeds; do
  for m in "${models[@]}"; do
    [[ " $(seed_list "$m") " == *" $s "* ]] || continue
    runs+=("${m}_s$s") run_model+=("$m") run_seed+=("$s")
  done
done

# Tokens/s per model: the median of its runs' own logged steps, else configs/experiments/
# throughput.json x ranks (ideal scaling), else unknown: the slowest known rate.
declare -A rate rate_src
while IFS=$'\t' read -r m r src; do rate[$m]=$r rate_src[$m]=$src; done < <(
  python3 - "$throughput" "$out" "$ranks" "${models[@]}" << 'PY'
import glob, json, os, statistics, sys
tp, out, ranks, models = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
with open(tp) as f:
    measured = json.load(f).get("measured", {})
rates = {}
for m in models:
    logged = []
    for path in glob.glob(os.path.join(out, m + "_s*", "metrics.jsonl")):
        with open(path) as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if rec.get("tokens_per_s") and not rec.get("skipped"):
                    logged.append(rec["tokens_per_s"])
    if logged:
        rates[m] = (statistics.median(logged), f"median of {len(logged)} logged steps in {out}")
    elif m in measured:
        src = measured[m].get("source", "throughput.json")
        note = f" x {ranks} GPUs, ideal scaling" if ranks > 1 else ""
        rates[m] = (measured[m]["tokens_per_s"] * ranks, f"measured: {src}{note}")
known = [r for r, _ in rates.values()] + [v["tokens_per_s"] * ranks for v in measured.values()]
slowest = min(known) if known else 0
for m in models:
    note = f" ({ranks} GPUs, ideal scaling)" if ranks > 1 else ""
    r, src = rates.get(m, (slowest, f"unknown: the slowest known rate{note}" if known else "unknown"))
    print(f"{m}\t{r:.0f}\t{src}")
PY
)

fmt_s() { local s=$1; printf '%dh%02dm%02ds' $((s / 3600)) $((s % 3600 / 60)) $((s % 60)); }
ckpt_step() {  # the newest checkpoint's step in a run directory, 0 without one
  local f n=0
  for f in "$1"/checkpoints/step_*.h5; do
    [[ -e $f ]] || continue
    f=${f##*/step_} f=${f%.h5}
    ((10#$f > n)) && n=$((10#$f))
  done
  echo $n
}
estimate_s() {  # estimate_s model steps_left -> seconds
  local r=${rate[$1]}
  ((r > 0)) || { echo 0; return; }
  echo $(($2 * global / r + overhead_s))
}

train_cmd() {  # train_cmd index -> the array cmd
  local i=$1 rd="$out/${runs[$1]}" s
  cmd=()
  ((ranks > 1)) && cmd+=("$repo/scripts/launch.sh" -n "$ranks" --)
  cmd+=("$bin" train --config "$configs/${run_model[i]}.yaml" --run-dir "$rd" --device "$device"
        --set "train.steps=$steps" --set "train.seed=${run_seed[i]}"
        --set "data.train=$data/corpus_train_*.bin" --set "data.val=$data/${held_out[0]}_val_*.bin")
  for s in "${sets[@]}"; do cmd+=(--set "$s"); done
  if (($(ckpt_step "$rd") > 0)); then cmd+=(--resume)
  elif [[ -e $rd/metrics.jsonl ]]; then cmd+=(--overwrite); fi  # started, but no checkpoint to resume
}
eval_cmd() {  # eval_cmd index set -> the array cmd
  cmd=("$bin" eval --checkpoint "$out/${runs[$1]}/checkpoints/step_$(printf %08d "$steps").h5"
       --data "$data/${2}_val_*.bin" --batches "$eval_batches" --json --device "$device")
}
show() { printf ' %q' "$@"; }

# The plan, with the estimated time of what is left.
total_s=0
left=()
say "plan: ${#runs[@]} runs of $steps steps x $global tokens = $((steps * global)) tokens each (--tokens $tokens)"
say "global batch: $global tokens = $batch_words, the same for every model"
for i in "${!runs[@]}"; do
  rd="$out/${runs[i]}" m=${run_model[i]}
  if [[ -e $rd/finished.json ]]; then
    state="finished" est=0
    [[ $(< "$rd/finished.json") =~ \"steps\":\ *([0-9]+) ]] && ((BASH_REMATCH[1] == steps)) ||
      die "$rd finished with other steps than the $steps of this plan (see its finished.json);" \
        "keep --tokens and the batch of that comparison, or pass another --out"
  else
    done_steps=$(ckpt_step "$rd")
    state=$( ((done_steps > 0)) && echo "resume at step $done_steps" || echo "new")
    est=$(estimate_s "$m" $((steps - done_steps)))
    left+=("$i")
  fi
  total_s=$((total_s + est))
  printf '  [%d/%d] %-20s %-22s est %s at %s tokens/s (%s)\n' $((i + 1)) ${#runs[@]} "${runs[i]}" "$state" \
    "$(fmt_s "$est")" "${rate[$m]}" "${rate_src[$m]}"
  [[ $state == finished ]] && continue
  train_cmd "$i"; echo "        train:$(show "${cmd[@]}")"
  for s in "${held_out[@]}"; do eval_cmd "$i" "$s"; echo "        eval: $(show "${cmd[@]}")"; done
done
say "estimated time left: $(fmt_s "$total_s") for ${#left[@]} unfinished run(s) (${overhead_s}s start-up and evaluation each)"
((dry_run)) && exit 0

# Preconditions of a real sitting.
[[ -x $bin ]] || die "the deltatron binary '$bin' is missing or not executable; build it" \
  "(cmake -S . -B build && cmake --build build --target deltatron) or pass --deltatron BIN"
compgen -G "$data/corpus_train_*.bin" > /dev/null ||
  die "no training shards $data/corpus_train_*.bin; prepare the corpus there or pass --data DIR"
for s in "${held_out[@]}"; do
  compgen -G "$data/${s}_val_*.bin" > /dev/null ||
    die "no held-out shards $data/${s}_val_*.bin; prepare them there or pass --data DIR"
done
[[ -z $manifest || -r $manifest ]] || die "--corpus-manifest '$manifest' cannot be read"
mkdir -p "$out/info"

atomic_write() {  # atomic_write FILE: stdin -> FILE through a temp file and a rename
  local tmp="$1.tmp.$$"
  cat > "$tmp" && mv -f "$tmp" "$1"
}
json_obj() {  # json_obj key=value ...: values that parse as JSON stay typed, the rest are strings
  python3 -c 'import json, sys
def val(v):
    try: return json.loads(v)
    except ValueError: return v
print(json.dumps({k: val(v) for k, v in (a.split("=", 1) for a in sys.argv[1:])}))' "$@"
}
if [[ -n ${DELTATRON_COMMIT:-} ]]; then
  commit=${DELTATRON_COMMIT%-dirty}
  dirty=$([[ $DELTATRON_COMMIT == *-dirty ]] && echo true || echo false)
else
  commit=$(git -C "$repo" rev-parse HEAD 2> /dev/null || echo unknown)
  dirty=$([[ -n $(git -C "$repo" status --porcelain --untracked-files=no 2> /dev/null) ]] && echo true || echo false)
fi
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2> /dev/null | head -1 || true)
[[ $device == cpu || -z $gpu_name ]] && gpu_name="none ($device)"
host=$(hostname)

[[ -n $manifest ]] && atomic_write "$out/corpus_manifest.json" < "$manifest"
for m in "${models[@]}"; do
  [[ -s $out/info/$m.json ]] && continue
  "$bin" info "$configs/$m.yaml" --json 2> "$out/info/$m.err" | atomic_write "$out/info/$m.json" ||
    { rm -f "$out/info/$m.json"; say "warning: '$bin info $configs/$m.yaml --json' failed ($out/info/$m.err);" \
        "the report leaves $m's parameters and decode memory n/a"; }
done
{
  json_obj invocation="$invocation" commit="$commit" dirty="$dirty" gpu="$gpu_name" ranks="$ranks" \
    global_batch_tokens="$global" global_batch="$batch_words" tokens="$tokens" steps="$steps" \
    eval_batches="$eval_batches" data="$data" configs="$configs" device="$device"
} | atomic_write "$out/plan.json"

# One sitting of one run: training (resumed where it stopped), then the three evaluations.
sitting_start="" current=""
end_sitting() {  # end_sitting status
  [[ -n $current ]] || return 0
  local rd="$out/${runs[current]}" now
  now=$(date +%s)
  {
    [[ -e $rd/sittings.jsonl ]] && cat "$rd/sittings.jsonl"
    json_obj start="$(date -u -d "@$sitting_start" +%FT%TZ)" end="$(date -u -d "@$now" +%FT%TZ)" \
      wall_s=$((now - sitting_start)) host="$host" commit="$commit" dirty="$dirty" gpu="$gpu_name" ranks="$ranks" \
      status="$1" steps_from="$sitting_from" steps_to="$(ckpt_step "$rd")" command="$sitting_cmd"
  } | atomic_write "$rd/sittings.jsonl"
  current=""
}
trap 'end_sitting interrupted; exit 130' INT TERM
script_start=$(date +%s)
stopped=0
for n in "${!left[@]}"; do
  i=${left[n]} rd="$out/${runs[${left[n]}]}" m=${run_model[${left[n]}]}
  sitting_from=$(ckpt_step "$rd")
  est=$(estimate_s "$m" $((steps - sitting_from)))
  rest=0
  for j in "${left[@]:n}"; do rest=$((rest + $(estimate_s "${run_model[j]}" $((steps - $(ckpt_step "$out/${runs[j]}")))))); done
  elapsed=$(($(date +%s) - script_start))
  if [[ -n $time_limit ]] && ((elapsed + est > time_limit)); then
    say "stopping: ${runs[i]} needs about $(fmt_s "$est") and $(fmt_s $((time_limit - elapsed))) of" \
      "--time-limit $time_limit are left; $((${#left[@]} - n)) run(s) remain: run the same command again"
    stopped=1
    break
  fi
  say "[$((i + 1))/${#runs[@]}] ${runs[i]}: from step $sitting_from to $steps, est $(fmt_s "$est");" \
    "overall ETA $(fmt_s "$rest") (about $(date -d "@$(($(date +%s) + rest))" +%H:%M))"
  mkdir -p "$rd"
  train_cmd "$i"
  sitting_start=$(date +%s) sitting_cmd="$(show "${cmd[@]}")" current=$i
  rc=0
  "${cmd[@]}" || rc=$?
  if ((rc != 0)); then
    end_sitting "train failed ($rc)"
    die "training ${runs[i]} failed (exit $rc); see $rd/log.txt, fix the cause and run the same command again"
  fi
  for s in "${held_out[@]}"; do
    eval_cmd "$i" "$s"
    rc=0
    "${cmd[@]}" > "$rd/eval_$s.json.tmp" 2> "$rd/eval_$s.err" || rc=$?
    if ((rc != 0)); then
      end_sitting "eval failed ($rc)"
      die "evaluating ${runs[i]} on $s failed (exit $rc): $(tail -1 "$rd/eval_$s.err"); see $rd/eval_$s.err"
    fi
  done
  python3 - "$rd" "$eval_batches" "${held_out[@]}" << 'PY' | atomic_write "$rd/eval.json"
import json, os, sys
rd, requested, sets = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
res = {}
for s in sets:
    tmp = os.path.join(rd, f"eval_{s}.json.tmp")
    with open(tmp) as f:
        res[s] = json.loads(f.read().strip().splitlines()[-1])
    os.remove(tmp)
first = res[sets[0]]
print(json.dumps({"checkpoint": first["checkpoint"], "step": first["step"], "batches_requested": requested,
                  "sets": res}, indent=1))
PY
  json_obj steps="$steps" tokens=$((steps * global)) global_batch_tokens="$global" \
    finished="$(date -u +%FT%TZ)" | atomic_write "$rd/finished.json"
  end_sitting finished
  say "${runs[i]}: finished; $(python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["sets"]
print(", ".join(k + " " + format(v["val_loss"], ".4f") for k, v in e.items()))' "$rd/eval.json")"
done

if compgen -G "$out/*/finished.json" > /dev/null; then "${report_cmd[@]}"; fi
((stopped)) && exit 3
say "all ${#runs[@]} runs finished"
