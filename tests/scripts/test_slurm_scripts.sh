#!/usr/bin/env bash
# scripts/slurm/*.sbatch: valid bash, and the lines that make a run pre-emptible and requeued:
# --requeue, the early SIGTERM to the batch script, its forwarding to mpirun as SIGUSR1, launch.sh,
# --resume when checkpoints exist, the requeue after a clean stop, and the node counts.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
failures=0
expect() {  # FILE PATTERN
  grep -qE -- "$2" "$1" || { echo "FAIL $(basename "$1"): no line matching: $2"; failures=$((failures + 1)); }
}
for f in "$root"/scripts/slurm/train_1node.sbatch "$root"/scripts/slurm/train_2nodes.sbatch; do
  bash -n "$f" || { echo "FAIL $f: bash -n"; failures=$((failures + 1)); }
  expect "$f" '^#SBATCH --requeue$'
  expect "$f" '^#SBATCH --signal=B:TERM@[0-9]+$'
  expect "$f" '^#SBATCH --gpus-per-node=8$'
  expect "$f" '^trap forward_stop TERM$'
  expect "$f" 'kill -USR1 "\$launcher"'
  expect "$f" '^scripts/launch.sh .*-p 8 -- build/deltatron train --config "\$config" --run-dir "\$run_dir"'
  expect "$f" 'resume=\(--resume\)'
  expect "$f" 'scontrol requeue "\$SLURM_JOB_ID"'
done
expect "$root/scripts/slurm/train_1node.sbatch" '^#SBATCH --nodes=1$'
expect "$root/scripts/slurm/train_2nodes.sbatch" '^#SBATCH --nodes=2$'
expect "$root/scripts/slurm/train_2nodes.sbatch" 'scontrol show hostnames "\$SLURM_JOB_NODELIST"'
((failures == 0)) && echo "PASS slurm scripts"
exit $((failures > 0))
