// The process side of running under `mpirun`: starting and ending MPI, and the abort path.
//
//   int main(...) {                     // or the body of `deltatron train`
//     dt::MpiRuntime mpi;               // MPI_Init_thread when launched by mpirun/srun, else nothing
//     dt::run_or_abort_job([&] { ... });
//   }
//
// Failure semantics: an error on one rank ends the whole job at once with that rank's
// message, `deltatron: error: [rank r] <what>`, instead of leaving the others waiting in a
// collective. A rank that hangs or skips a collective is caught by the others' collective
// timeout (CommOptions::timeout_s), which takes the same abort path.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace dt {

// True when a launcher started this process as one of several ranks (Open MPI's
// OMPI_COMM_WORLD_SIZE, PMI_SIZE of MPICH/Hydra and Intel MPI, PMIX_RANK of PMIx launchers such as
// `srun --mpi=pmix`).
bool launched_with_mpi();

// One per process, alive for as long as anything communicates. Starts MPI (thread level
// FUNNELED: only the main thread calls MPI) when launched by a launcher; otherwise starts nothing
// and the world is this one process. Ends MPI on destruction, unless an exception is unwinding
// (then it leaves MPI as is, so that the process exits non-zero and mpirun ends the job).
class MpiRuntime {
 public:
  MpiRuntime();
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  bool active() const { return active_; }  // MPI was started here
  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  // Rank among the ranks on this node (MPI_COMM_TYPE_SHARED): which GPU this rank takes.
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }

 private:
  bool active_ = false;
  int world_rank_ = 0, world_size_ = 1, local_rank_ = 0, local_size_ = 1;
};

// The rank of this process in the world (0 without MPI).
int world_rank();
// True when MPI is running with more than one rank (so an error must end the other ranks too).
bool several_ranks();

// Prints "deltatron: error: [rank r] <what>" to stderr and ends the whole job: MPI_Abort when MPI
// runs, else exits with status 1. Never returns.
[[noreturn]] void abort_job(std::string_view what);

// A description of a rank on this host whose process has died ("rank 1 (pid N on this host)
// vanished: ..."), or "" while they all live. Ranks that call MPI_Finalize wait there for each
// other, so while a rank waits in a collective a vanished peer is always a killed or crashed one.
// Ranks on other hosts are not watched: their death shows as the collective's timeout.
std::string vanished_local_rank();

// Runs body. When several ranks run, an exception escaping it goes to abort_job with its message,
// so every rank stops within moments; in a single process it propagates to the caller (main
// prints `deltatron: error: <what>` as for every command).
void run_or_abort_job(const std::function<void()>& body);

}  // namespace dt
