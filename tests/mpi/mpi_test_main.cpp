// main() of the MPI test executable: starts MPI, makes the world communicator, runs gtest on
// every rank. Rank 0 prints the usual report; the other ranks print only their failures (with
// their rank), and each rank's exit status says whether it passed, so mpirun fails when any did.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <memory>

#include "parallel/communicator.h"
#include "parallel/mpi_runtime.h"
#include "tests/mpi/mpi_test_util.h"

namespace dt::mpitest {

namespace {
Communicator* g_world = nullptr;

// Prints a failed assertion of a non-zero rank, prefixed by the rank.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] FAILED %s:%d\n%s\n", rank_, r.file_name() ? r.file_name() : "?",
                   r.line_number(), r.summary());
  }

 private:
  int rank_;
};
}  // namespace

Communicator& world() { return *g_world; }

}  // namespace dt::mpitest

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (!dt::launched_with_mpi()) {
    std::fprintf(stderr, "test_mpi runs under mpirun: tests/mpi/run_mpi.sh mpirun 2 %s\n", argv[0]);
    return 1;
  }
  dt::MpiRuntime mpi;
  int status = 1;
  dt::run_or_abort_job([&] {
    auto world = dt::make_communicator({.backend = dt::CommBackend::kMpi, .timeout_s = 30});
    dt::mpitest::g_world = world.get();
    if (mpi.world_rank() != 0) {
      auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
      delete listeners.Release(listeners.default_result_printer());
      listeners.Append(new dt::mpitest::RankFailurePrinter(mpi.world_rank()));
    }
    status = RUN_ALL_TESTS();
    dt::mpitest::g_world = nullptr;
  });
  return status;
}
