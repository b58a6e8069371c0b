// The backends' constructors (internal to parallel/; everyone else calls make_communicator).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "parallel/communicator.h"
#include "parallel/mpi_runtime.h"

namespace dt {

// comm_single.cpp: a group of one.
std::unique_ptr<Communicator> make_single_communicator(std::string name, Device device, double timeout_s);

// comm_mpi.cpp: MPI_COMM_WORLD (duplicated), CPU tensors. Throws when the build has no MPI or MPI
// was not started (MpiRuntime).
std::unique_ptr<Communicator> make_mpi_world_communicator(double timeout_s);

// comm_nccl.cpp: NCCL over the ranks of `bootstrap` (rank 0 creates the unique id, `bootstrap`
// broadcasts it), on GPU `cuda_device`, ordered after work on `stream`. Throws without NCCL.
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int cuda_device, void* stream,
                                                     double timeout_s);

// Polls `done` until it returns true; past timeout_s, abort_job with "<what> waited more than ...".
// Spins briefly, then sleeps in growing steps (up to 0.5 ms) so that oversubscribed ranks (CI runs
// 4 ranks on 2 cores) leave the cores to the ranks that have work. Every 50 ms of waiting it looks
// for a rank on this host that has died (vanished_local_rank) and ends the job naming it, before
// the launcher's own clean-up kills this rank.
template <class Done>
void poll_until(Done&& done, double timeout_s, const std::string& what) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  int polls = 0;
  auto nap = std::chrono::microseconds(1);
  auto next_watch = start + std::chrono::milliseconds(50);
  while (!done()) {
    if (++polls < 200) {
      std::this_thread::yield();
      continue;
    }
    const auto now = Clock::now();
    if (now > next_watch) {
      next_watch = now + std::chrono::milliseconds(50);
      if (std::string who = vanished_local_rank(); !who.empty())
        abort_job(fmt::format("{}, while this rank waited in {}", who, what));
    }
    if (now > deadline) {
      abort_job(fmt::format("{} waited more than {:g} s for the other ranks: a rank stopped, hung or skipped this "
                            "collective (see the other ranks' messages); if the job is only slow, raise the "
                            "collective timeout",
                            what, timeout_s));
    }
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::microseconds(500));
  }
}

}  // namespace dt
