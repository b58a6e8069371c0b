#!/usr/bin/env bash
# Stopping `deltatron train` under mpirun on a signal (trainer/stop_signal.h), 2 CPU ranks:
#   1. SIGUSR1 to mpirun (which forwards it to every rank): all ranks stop after the same step,
#      rank 0 saves the checkpoint of that step, mpirun exits 0; --resume then ends with the
#      losses of an uninterrupted run;
#   2. SIGTERM to rank 1 alone: the ranks agree at the next step boundary and stop together;
#   3. SIGKILL to rank 1: rank 0 prints one `deltatron: error:` line naming rank 1 and its pid;
#   4. SIGTERM (a scheduler) and SIGINT (Ctrl-C) to scripts/launch.sh: it asks mpirun for SIGUSR1,
#      every rank stops after the same step, rank 0 saves, and launch.sh exits 0.
# The shards are written by hand, without a prepare manifest (data.require_manifest: false).
# Usage: test_mpi_signal.sh MPIEXEC DELTATRON
set -uo pipefail
mpiexec=$1 deltatron=$2
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

# Enough steps that a run is still going when the signal comes, however fast the machine (a run of
# 200 steps can end within the moment between its third metrics line and the signal).
steps=3000

# Tiny shards (tokens < 61, vocabulary 64) and a two-layer hybrid that takes milliseconds a step.
python3 - "$dir" <<'PY'
import struct, sys
def shard(path, n, off):
    toks = [(3 * i + (i // 17) * 5 + off) % 61 for i in range(n)]
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
        f.write(struct.pack("<%dH" % n, *toks))
shard(sys.argv[1] + "/tiny_train_000001.bin", 3000, 0)
shard(sys.argv[1] + "/tiny_val_000000.bin", 700, 7)
PY
"$deltatron" train --print-config --set model.vocab_size=64 --set model.d_model=32 --set model.d_ff=48 \
  --set 'model.layers=[gdn, attn]' --set model.attn.n_heads=2 --set model.attn.n_kv_heads=1 \
  --set model.attn.head_dim=16 --set model.attn.rotary_dim=8 --set model.gdn.n_k_heads=1 \
  --set model.gdn.n_v_heads=2 --set model.gdn.head_k_dim=16 --set model.gdn.head_v_dim=8 \
  --set model.gdn.chunk_size=8 --set "data.train=$dir/tiny_train_*.bin" --set "data.val=$dir/tiny_val_*.bin" --set data.require_manifest=false \
  --set train.batch_size=2 --set train.seq_len=20 --set train.steps=$steps --set train.warmup_steps=2 \
  --set train.eval_every=0 --set train.eval_batches=2 --set train.checkpoint_every=0 --set run.threads=1 --set run.device=cpu \
  >"$dir/tiny.yaml" || { echo "FAIL cannot write the config"; exit 1; }

# train RUN [ARGS...] in the background under mpirun with 2 ranks; sets $pid (mpirun's).
train_bg() {
  local run=$1
  shift
  MPI_TEST_TIMEOUT=120 bash "$here/run_mpi.sh" "$mpiexec" 2 "$deltatron" train --config "$dir/tiny.yaml" \
    --run-dir "$dir/$run" "$@" >"$dir/$run.out" 2>&1 &
  pid=$!
}
# Waits until RUN's metrics.jsonl has 3 lines (while mpirun, $pid, runs).
wait_steps() {
  for _ in $(seq 600); do
    kill -0 "$pid" 2>/dev/null || return 1
    [[ -f $dir/$1/metrics.jsonl && $(wc -l <"$dir/$1/metrics.jsonl") -ge 3 ]] && return 0
    sleep 0.1
  done
  return 1
}
last_loss() { grep '"loss"' "$dir/$1/metrics.jsonl" | tail -1 | sed 's/.*"loss":\([^,]*\),.*/\1/'; }
# The PID of the rank-1 process under mpirun (its environment has OMPI_COMM_WORLD_RANK=1).
rank1_pid() {
  local p
  for p in $(pgrep -f -- "--run-dir $dir/$1"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=1 && { echo "$p"; return; }
  done
}
# check_stopped RUN SIGNAL_NAME STATUS: exit 0, both ranks stopped after the checkpoint's step.
check_stopped() {
  local run=$1 name=$2 status=$3 step
  ((status == 0)) || fail "$run: mpirun exited $status"
  step=$(ls "$dir/$run/checkpoints" 2>/dev/null | sed -n 's/^step_0*\([0-9]*\)\.h5$/\1/p' | tail -1)
  [[ -n $step ]] || { fail "$run: no checkpoint"; sed 's/^/    | /' "$dir/$run.out" | tail -20; return; }
  grep -q "stopped by $name after step $step/$steps: checkpoint saved" "$dir/$run.out" ||
    { fail "$run: no 'stopped by $name after step $step/$steps'"; sed 's/^/    | /' "$dir/$run.out" | tail -20; }
  echo "$run: stopped by $name after step $step"
}

train_bg straight
wait "$pid" || fail "the straight run failed"

# 1. SIGUSR1 to mpirun.
train_bg usr1
wait_steps usr1 || fail "usr1: no steps"
kill -USR1 "$(pgrep -P "$pid" -f "$mpiexec" | head -1 || echo "$pid")" 2>/dev/null
wait "$pid"
check_stopped usr1 SIGUSR1 $?
step=$(ls "$dir/usr1/checkpoints" | sed -n 's/^step_0*\([0-9]*\)\.h5$/\1/p' | tail -1)
if [[ -n $step ]]; then
  train_bg usr1 --resume
  wait "$pid" || fail "usr1: --resume failed"
  [[ $(last_loss usr1) == "$(last_loss straight)" ]] ||
    fail "usr1: resumed final loss $(last_loss usr1) != straight $(last_loss straight)"
fi

# 2. SIGTERM to rank 1 alone.
train_bg term1
wait_steps term1 || fail "term1: no steps"
r1=$(rank1_pid term1)
[[ -n $r1 ]] && kill -TERM "$r1" || fail "term1: rank 1 not found"
wait "$pid"
check_stopped term1 "a signal to another rank" $?

# 3. SIGKILL to rank 1: rank 0, waiting for it in a collective, names it before the job ends.
train_bg kill1
wait_steps kill1 || fail "kill1: no steps"
r1=$(rank1_pid kill1)
[[ -n $r1 ]] && kill -KILL "$r1" || fail "kill1: rank 1 not found"
wait "$pid"
status=$?
((status != 0 && status != 124)) || fail "kill1: mpirun exited $status"
grep -qE "^deltatron: error: \[rank 0\] rank 1 \(pid $r1 on this host\) vanished: it was killed by a signal" \
  "$dir/kill1.out" && echo "kill1: rank 0 named rank 1 (pid $r1), mpirun exited $status" ||
  { fail "kill1: rank 0 did not name rank 1"; sed 's/^/    | /' "$dir/kill1.out" | tail -20; }

# 4. SIGTERM and SIGINT to scripts/launch.sh. The wrapper restores SIGINT's default action, which
# bash sets to "ignore" for a background command (a signal ignored at a shell's start cannot be trapped).
launch=$here/../../scripts/launch.sh
for sig in TERM INT; do
  run=launch_${sig,,}
  MPIRUN=$mpiexec python3 -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])' \
    bash "$launch" -n 2 -p 2 -- "$deltatron" train --config "$dir/tiny.yaml" --run-dir "$dir/$run" >"$dir/$run.out" 2>&1 &
  pid=$!
  wait_steps "$run" || fail "$run: no steps"
  kill -"$sig" "$pid"
  # A bound on the wait: a launcher that does not end within 120 s fails the test instead of stalling it.
  for _ in $(seq 1200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && { fail "$run: launch.sh still runs 120 s after SIG$sig"; pkill -KILL -f -- "--run-dir $dir/$run"; }
  wait "$pid"
  status=$?
  check_stopped "$run" SIGUSR1 "$status"
  grep -q "launch: SIG$sig received: asking the ranks to stop" "$dir/$run.out" ||
    fail "$run: launch.sh did not say that it received SIG$sig"
done
exit $((failures > 0))
