#!/usr/bin/env bash
# Runs a program under mpirun for the tests: run_mpi.sh MPIEXEC NP PROGRAM [ARGS...]
# Open MPI gets --oversubscribe (CI has 2 cores; the 4-rank run needs more slots than cores) and,
# as root (containers), the two variables that allow it. `timeout` bounds the whole run so that a
# hang fails the test instead of stalling CI.
set -uo pipefail
mpiexec=$1 np=$2
shift 2
extra=()
if "$mpiexec" --version 2>&1 | grep -qiE "open mpi|openrte|open-mpi"; then
  extra+=(--oversubscribe)
  if [[ $(id -u) -eq 0 ]]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  fi
fi
exec timeout -k 5 "${MPI_TEST_TIMEOUT:-100}" "$mpiexec" -np "$np" "${extra[@]}" "$@"
