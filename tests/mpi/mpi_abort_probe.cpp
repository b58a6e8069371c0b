// A small program for tests/mpi/test_mpi_abort.sh: the failure semantics of parallel/mpi_runtime.h, run under
// mpirun. Usage: mpi_abort_probe <scenario> <timeout_s>
//   ok     every rank all-reduces and prints "probe ok"; exit status 0
//   error  rank 1 throws a dt::Error while the others wait in an all-reduce: the job must end at
//          once (well before the timeout) with "deltatron: error: [rank 1] <its message>"
//   skip   rank 1 skips the all-reduce and sleeps: the others' collective times out and ends the
//          job with "deltatron: error: [rank 0] all_reduce(sum) ... waited more than <timeout> s"
//   kill   rank 1 is killed by SIGKILL while the others wait in the all-reduce: they name it,
//          "deltatron: error: [rank 0] rank 1 (pid N on this host) vanished ...". Every rank ignores
//          SIGTERM first, as a training run's stop handler does (trainer/stop_signal.h), so that the
//          launcher's clean-up does not end the survivors before they look.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "parallel/communicator.h"
#include "parallel/mpi_runtime.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: mpi_abort_probe ok|error|skip|kill TIMEOUT_S\n");
    return 2;
  }
  const std::string scenario = argv[1];
  const double timeout_s = std::atof(argv[2]);
  dt::MpiRuntime mpi;
  dt::run_or_abort_job([&] {
    auto world = dt::make_communicator({.backend = dt::CommBackend::kMpi, .timeout_s = timeout_s});
    std::vector<float> x(1000, 1.0f);
    dt::Tensor t(x.data(), dt::DType::kF32, dt::Device::kCPU, {1000});
    if (scenario == "kill") signal(SIGTERM, SIG_IGN);
    world->barrier();
    if (world->rank() == 1 && scenario == "kill") raise(SIGKILL);
    if (world->rank() == 1 && scenario == "error")
      DT_FAIL("shard 'train_000001.bin': bad magic 12345 (probe error on purpose)");
    if (world->rank() == 1 && scenario == "skip") {
      std::this_thread::sleep_for(std::chrono::seconds(120));  // never comes to the all-reduce
      return;
    }
    world->all_reduce(t);
    if (x[0] != static_cast<float>(world->size())) DT_FAIL("wrong sum {}", x[0]);
    world->barrier();
    if (world->rank() == 0) std::printf("probe ok\n");
  });
  return 0;
}
