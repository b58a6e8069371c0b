// Stopping a run cleanly on SIGTERM (a scheduler's pre-emption, Slurm's --signal), SIGINT (Ctrl-C)
// or SIGUSR1: the handler only records the signal; the training loop checks it at each step
// boundary, finishes the step, writes a checkpoint and returns, so the process exits 0 and
// `--resume` continues the run. A second signal ends the process at once (the default action).
// Under mpirun every rank reduces the flag each step (any rank stopping stops all), so all ranks
// stop after the same step and take part in the same checkpoint save. Open MPI's mpirun forwards
// SIGUSR1 to every rank as is, but answers SIGTERM by killing the ranks a second later: under
// mpirun send SIGUSR1 to mpirun (docs/operations.md).
#pragma once

namespace dt {

// Installs the SIGTERM, SIGINT and SIGUSR1 handlers for its lifetime; restores the previous ones after.
class StopSignal {
 public:
  StopSignal();
  ~StopSignal();
  StopSignal(const StopSignal&) = delete;
  StopSignal& operator=(const StopSignal&) = delete;

  // The signal received since construction (SIGTERM, SIGINT or SIGUSR1), 0 when none.
  int received() const;
};

// "SIGTERM", "SIGINT", "SIGUSR1", or "a signal".
const char* stop_signal_name(int sig);

}  // namespace dt
