#!/usr/bin/env bash
# Failure semantics under mpirun (parallel/mpi_runtime.h), with tests/mpi/mpi_abort_probe:
#   1. a control run succeeds (exit 0, "probe ok");
#   2. an error on rank 1 ends the whole job at once (well before the 50 s collective timeout)
#      with non-zero status and "deltatron: error: [rank 1] <its message>", on 2 and 4 ranks;
#   3. a rank killed by SIGKILL while the others wait: they name it, on 2 and 4 ranks;
#   4. a rank that skips a collective: the others time out after 2 s and end the job with a
#      message naming the collective and the rank.
# Each run sits under `timeout 60` (a hang fails with status 124).
# Usage: test_mpi_abort.sh MPIEXEC PROBE
set -uo pipefail
mpiexec=$1 probe=$2
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
failures=0

# run NAME NP SCENARIO TIMEOUT_S EXPECT_STATUS(0|nonzero|killed) MAX_SECONDS PATTERN
run() {
  local name=$1 np=$2 scenario=$3 timeout_s=$4 expect=$5 max_s=$6 pattern=$7
  local start=$SECONDS
  MPI_TEST_TIMEOUT=60 bash "$here/run_mpi.sh" "$mpiexec" "$np" "$probe" "$scenario" "$timeout_s" >"$out" 2>&1
  local status=$? took=$((SECONDS - start)) ok=1
  if [[ $expect == 0 && $status -ne 0 ]]; then ok=0; fi
  if [[ $expect == nonzero && ( $status -eq 0 || $status -eq 124 || $status -eq 137 ) ]]; then ok=0; fi
  # killed: mpirun reports the killed rank's own signal (137 = 128 + SIGKILL); only a timeout (124) fails.
  if [[ $expect == killed && ( $status -eq 0 || $status -eq 124 ) ]]; then ok=0; fi
  if (( took > max_s )); then ok=0; fi
  if ! grep -qE -- "$pattern" "$out"; then ok=0; fi
  if (( ok )); then
    echo "PASS $name (exit $status, ${took} s)"
  else
    echo "FAIL $name: exit $status after ${took} s (want $expect within ${max_s} s), output should match: $pattern"
    sed 's/^/    | /' "$out" | head -40
    failures=$((failures + 1))
  fi
}

run "control run, 2 ranks" 2 ok 30 0 30 "^probe ok"
run "error on rank 1 ends 2 ranks" 2 error 50 nonzero 25 \
  "^deltatron: error: \[rank 1\] shard 'train_000001.bin': bad magic 12345 \(probe error on purpose\)"
run "error on rank 1 ends 4 ranks" 4 error 50 nonzero 25 \
  "^deltatron: error: \[rank 1\] shard 'train_000001.bin': bad magic 12345"
run "a killed rank is named by the survivors, 2 ranks" 2 kill 50 killed 25 \
  "^deltatron: error: \[rank 0\] rank 1 \(pid [0-9]+ on this host\) vanished: it was killed by a signal"
run "a killed rank is named by the survivors, 4 ranks" 4 kill 50 killed 25 \
  "^deltatron: error: \[rank [023]\] rank 1 \(pid [0-9]+ on this host\) vanished: it was killed by a signal"
run "skipped collective times out" 2 skip 2 nonzero 25 \
  "^deltatron: error: \[rank 0\] all_reduce\(sum\) of f32\[1000\] cpu on communicator 'world' \(mpi backend, rank 0 of 2\) waited more than 2 s"
exit $((failures > 0))
