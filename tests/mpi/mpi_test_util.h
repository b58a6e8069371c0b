// Shared by the MPI tests (tests/mpi), which run as one gtest executable under
// `mpirun -np 2` and `-np 4` (tests/mpi/run_mpi.sh). Every rank runs every test: a test must call
// the same collectives on every rank, so checks are EXPECT_* (an ASSERT_* that returns early on
// one rank would leave the others waiting until the collective timeout aborts the job).
#pragma once

#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "core/dtype.h"
#include "core/philox.h"
#include "parallel/communicator.h"

namespace dt::mpitest {

// The world communicator (MPI, timeout 30 s), made in mpi_test_main.cpp.
Communicator& world();

// Input value i of rank r in case c: normal * 2^k with k in [-12, 12], so that sums depend on
// their order (a test can tell rank order from any other).
inline double value(int rank, int c, int64_t i) {
  const double z = philox_normal(0xD417u, static_cast<uint64_t>(rank) * 1000 + c, static_cast<uint64_t>(i));
  const double k = std::floor(philox_uniform(0xD418u, static_cast<uint64_t>(rank) * 1000 + c, static_cast<uint64_t>(i)) * 25) - 12;
  return z * std::ldexp(1.0, static_cast<int>(k));
}

// True on every rank when `local` holds on every rank (checked with raw MPI, not the code under test).
inline bool all_ranks(bool local) {
  int in = local ? 1 : 0, out = 0;
  MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return out != 0;
}

// True when `bytes` are the same on every rank (raw MPI: gathers everyone's bytes and compares).
inline bool same_bytes_on_all_ranks(const void* p, size_t n) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<char> all(n * size);
  MPI_Allgather(p, static_cast<int>(n), MPI_BYTE, all.data(), static_cast<int>(n), MPI_BYTE, MPI_COMM_WORLD);
  bool same = true;
  for (int r = 1; r < size; ++r) same = same && std::memcmp(all.data(), all.data() + r * n, n) == 0;
  return all_ranks(same);
}

}  // namespace dt::mpitest
