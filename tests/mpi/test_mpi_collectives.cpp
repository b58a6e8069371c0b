// The MPI communicator's collectives on 2 and 4 ranks: values against a reference computed here
// (every rank can generate every rank's inputs), bitwise identity across ranks (checked with raw
// MPI), outputs poisoned before each call, odd sizes (fewer elements than ranks included), and
// asynchronous requests waited for out of order.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "parallel/communicator.h"
#include "tests/mpi/mpi_test_util.h"

namespace dt::mpitest {
namespace {

const DType kDtypes[] = {DType::kF32, DType::kF64, DType::kBF16, DType::kI32};
const int64_t kSizes[] = {1, 2, 3, 17, 1000, 4099};

// Rank r's n inputs of case c, as bytes of `dtype`. With nan_at >= 0, the last rank puts a NaN there.
std::vector<char> make_input(DType dtype, int rank, int c, int64_t n, int64_t nan_at = -1, int size = 0) {
  std::vector<char> out(n * dtype_size(dtype));
  for (int64_t i = 0; i < n; ++i) {
    double v = value(rank, c, i);
    if (i == nan_at && rank == size - 1) v = std::numeric_limits<double>::quiet_NaN();
    switch (dtype) {
      case DType::kF32: reinterpret_cast<float*>(out.data())[i] = static_cast<float>(v); break;
      case DType::kF64: reinterpret_cast<double*>(out.data())[i] = v; break;
      case DType::kBF16: reinterpret_cast<uint16_t*>(out.data())[i] = f32_to_bf16(static_cast<float>(v)); break;
      case DType::kI32:
        reinterpret_cast<int32_t*>(out.data())[i] =
            static_cast<int32_t>(static_cast<uint32_t>(static_cast<int64_t>(v * 262144.0)));
        break;
      default: break;
    }
  }
  return out;
}

// The specification, written out: op over ranks 0, 1, ..., size-1 in that order (or reversed),
// bf16 accumulated in float and rounded once, i32 wrapping, avg = sum / size, max NaN-propagating.
std::vector<char> reference(DType dtype, ReduceOp op, int size, int c, int64_t n, int64_t nan_at = -1,
                            bool reversed = false) {
  std::vector<std::vector<char>> in;
  for (int r = 0; r < size; ++r) in.push_back(make_input(dtype, r, c, n, nan_at, size));
  std::vector<char> out(n * dtype_size(dtype));
  for (int64_t i = 0; i < n; ++i) {
    auto fold = [&](auto load, auto acc) {
      using A = decltype(acc);
      for (int k = 0; k < size; ++k) {
        A x = load(in[reversed ? size - 1 - k : k], i);
        if (k == 0) {
          acc = x;
        } else if (op == ReduceOp::kMax) {
          if constexpr (std::is_floating_point_v<A>) {
            acc = (std::isnan(acc) || std::isnan(x)) ? std::numeric_limits<A>::quiet_NaN() : std::max(acc, x);
          } else {
            acc = std::max(acc, x);
          }
        } else if constexpr (std::is_same_v<A, int32_t>) {
          acc = static_cast<int32_t>(static_cast<uint32_t>(acc) + static_cast<uint32_t>(x));
        } else {
          acc = acc + x;
        }
      }
      if constexpr (std::is_floating_point_v<A>) {
        if (op == ReduceOp::kAvg) acc = acc / static_cast<A>(size);
      }
      return acc;
    };
    switch (dtype) {
      case DType::kF32:
        reinterpret_cast<float*>(out.data())[i] =
            fold([](const std::vector<char>& v, int64_t j) { return reinterpret_cast<const float*>(v.data())[j]; },
                 0.0f);
        break;
      case DType::kF64:
        reinterpret_cast<double*>(out.data())[i] =
            fold([](const std::vector<char>& v, int64_t j) { return reinterpret_cast<const double*>(v.data())[j]; },
                 0.0);
        break;
      case DType::kBF16:
        reinterpret_cast<uint16_t*>(out.data())[i] = f32_to_bf16(fold(
            [](const std::vector<char>& v, int64_t j) {
              return bf16_to_f32(reinterpret_cast<const uint16_t*>(v.data())[j]);
            },
            0.0f));
        break;
      case DType::kI32:
        reinterpret_cast<int32_t*>(out.data())[i] = fold(
            [](const std::vector<char>& v, int64_t j) { return reinterpret_cast<const int32_t*>(v.data())[j]; },
            int32_t{0});
        break;
      default: break;
    }
  }
  return out;
}

// Bytewise equality, where a NaN matches any NaN of the same dtype (payloads are not specified).
bool same_values(DType dtype, const std::vector<char>& a, const std::vector<char>& b) {
  if (a.size() != b.size()) return false;
  const size_t es = dtype_size(dtype);
  for (size_t i = 0; i < a.size(); i += es) {
    if (std::memcmp(a.data() + i, b.data() + i, es) == 0) continue;
    double x = 0, y = 0;
    if (dtype == DType::kF32) x = *reinterpret_cast<const float*>(a.data() + i), y = *reinterpret_cast<const float*>(b.data() + i);
    else if (dtype == DType::kF64) x = *reinterpret_cast<const double*>(a.data() + i), y = *reinterpret_cast<const double*>(b.data() + i);
    else if (dtype == DType::kBF16) x = bf16_to_f32(*reinterpret_cast<const uint16_t*>(a.data() + i)), y = bf16_to_f32(*reinterpret_cast<const uint16_t*>(b.data() + i));
    else return false;
    if (!(std::isnan(x) && std::isnan(y))) return false;
  }
  return true;
}

Tensor as_tensor(std::vector<char>& bytes, DType dtype) {
  return Tensor(bytes.data(), dtype, Device::kCPU, {static_cast<int64_t>(bytes.size() / dtype_size(dtype))});
}

std::string label(DType d, ReduceOp op, int64_t n) {
  return std::string(dtype_name(d)) + " " + std::string(reduce_op_name(op)) + " n=" + std::to_string(n);
}

TEST(MpiCollectives, WorldIsEveryRank) {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  EXPECT_EQ(world().rank(), rank);
  EXPECT_EQ(world().size(), size);
  EXPECT_EQ(world().backend(), "mpi");
  EXPECT_GE(size, 2);
}

TEST(MpiCollectives, AllReduceIsTheRankOrderReductionOnEveryRank) {
  Communicator& w = world();
  int c = 0;
  for (DType d : kDtypes) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kAvg}) {
      if (op == ReduceOp::kAvg && d == DType::kI32) continue;
      for (int64_t n : kSizes) {
        ++c;
        std::vector<char> buf = make_input(d, w.rank(), c, n);
        w.all_reduce(as_tensor(buf, d), op);
        EXPECT_TRUE(same_values(d, buf, reference(d, op, w.size(), c, n))) << label(d, op, n);
        EXPECT_TRUE(same_bytes_on_all_ranks(buf.data(), buf.size())) << label(d, op, n);
      }
    }
  }
}

TEST(MpiCollectives, TheReferenceCanTellTheOrder) {
  // The sums above are checked against the rank order; with 3+ ranks another order gives other
  // bits for some elements of these inputs, so a reduction in a different order would fail.
  if (world().size() < 3) GTEST_SKIP() << "with 2 ranks every order is the same (a + b == b + a)";
  EXPECT_NE(reference(DType::kF32, ReduceOp::kSum, world().size(), 7, 4099),
            reference(DType::kF32, ReduceOp::kSum, world().size(), 7, 4099, -1, /*reversed=*/true));
}

TEST(MpiCollectives, NanOnOneRankReachesEveryRank) {
  Communicator& w = world();
  for (DType d : {DType::kF32, DType::kBF16, DType::kF64}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kAvg}) {
      std::vector<char> buf = make_input(d, w.rank(), 90, 33, /*nan_at=*/5, w.size());
      w.all_reduce(as_tensor(buf, d), op);
      std::vector<char> ref = reference(d, op, w.size(), 90, 33, 5);
      EXPECT_TRUE(same_values(d, buf, ref)) << label(d, op, 33);
      double x = d == DType::kF32 ? reinterpret_cast<float*>(buf.data())[5]
                 : d == DType::kF64 ? reinterpret_cast<double*>(buf.data())[5]
                                    : bf16_to_f32(reinterpret_cast<uint16_t*>(buf.data())[5]);
      EXPECT_TRUE(std::isnan(x)) << label(d, op, 33);
    }
  }
}

TEST(MpiCollectives, ReduceScatterGivesEachRankItsChunk) {
  Communicator& w = world();
  int c = 200;
  for (DType d : kDtypes) {
    for (int64_t m : {int64_t{1}, int64_t{5}, int64_t{1001}}) {
      ++c;
      std::vector<char> in = make_input(d, w.rank(), c, m * w.size());
      std::vector<char> out(m * dtype_size(d), static_cast<char>(0xFF));  // poison (NaN for floats)
      w.reduce_scatter(as_tensor(out, d), as_tensor(in, d), ReduceOp::kSum);
      std::vector<char> full = reference(d, ReduceOp::kSum, w.size(), c, m * w.size());
      std::vector<char> mine(full.begin() + w.rank() * out.size(), full.begin() + (w.rank() + 1) * out.size());
      EXPECT_TRUE(same_values(d, out, mine)) << label(d, ReduceOp::kSum, m);
    }
  }
}

TEST(MpiCollectives, AllGatherConcatenatesInRankOrder) {
  Communicator& w = world();
  for (DType d : kDtypes) {
    for (int64_t m : {int64_t{1}, int64_t{7}, int64_t{1000}}) {
      for (bool in_place : {false, true}) {
        std::vector<char> in = make_input(d, w.rank(), 300, m);
        std::vector<char> out(m * w.size() * dtype_size(d), static_cast<char>(0xFF));
        Tensor out_t = as_tensor(out, d);
        Tensor in_t = as_tensor(in, d);
        if (in_place) {
          std::memcpy(out.data() + w.rank() * in.size(), in.data(), in.size());
          in_t = out_t.narrow0(w.rank() * m, m);
        }
        w.all_gather(out_t, in_t);
        std::vector<char> expected;
        for (int r = 0; r < w.size(); ++r) {
          std::vector<char> x = make_input(d, r, 300, m);
          expected.insert(expected.end(), x.begin(), x.end());
        }
        EXPECT_EQ(out, expected) << label(d, ReduceOp::kSum, m) << (in_place ? " in place" : "");
      }
    }
  }
}

TEST(MpiCollectives, BroadcastCopiesTheRoot) {
  Communicator& w = world();
  for (int root : {0, w.size() - 1}) {
    std::vector<char> buf = make_input(DType::kF32, w.rank(), 400, 123);
    w.broadcast(as_tensor(buf, DType::kF32), root);
    EXPECT_EQ(buf, make_input(DType::kF32, root, 400, 123)) << "root " << root;
  }
  w.barrier();
}

TEST(MpiCollectives, AsyncRequestsCompleteInAnyWaitOrder) {
  Communicator& w = world();
  std::vector<char> a = make_input(DType::kF32, w.rank(), 500, 1000);
  std::vector<char> b = make_input(DType::kF64, w.rank(), 501, 333);
  std::vector<char> c_in = make_input(DType::kBF16, w.rank(), 502, 10 * w.size());
  std::vector<char> c_out(10 * 2, static_cast<char>(0xFF));
  auto ra = w.all_reduce_async(as_tensor(a, DType::kF32), ReduceOp::kSum);
  // Rank 0 lets a finish before posting the rest; the others post at once. Phase 2 of `a` then
  // comes at different points of the ranks' programs, which the FIFO on a second communicator
  // must cope with.
  if (w.rank() == 0)
    while (!ra->test()) {
    }
  auto rb = w.all_reduce_async(as_tensor(b, DType::kF64), ReduceOp::kAvg);
  auto rc = w.reduce_scatter_async(as_tensor(c_out, DType::kBF16), as_tensor(c_in, DType::kBF16), ReduceOp::kMax);
  rb->wait();
  rc->wait();
  ra->wait();
  EXPECT_EQ(b, reference(DType::kF64, ReduceOp::kAvg, w.size(), 501, 333));
  EXPECT_EQ(a, reference(DType::kF32, ReduceOp::kSum, w.size(), 500, 1000));
  std::vector<char> c_full = reference(DType::kBF16, ReduceOp::kMax, w.size(), 502, 10 * w.size());
  EXPECT_EQ(c_out, std::vector<char>(c_full.begin() + w.rank() * 20, c_full.begin() + (w.rank() + 1) * 20));
  // A request dropped unwaited completes in its destructor.
  std::vector<char> d = make_input(DType::kF32, w.rank(), 503, 77);
  { auto rd = w.all_reduce_async(as_tensor(d, DType::kF32), ReduceOp::kSum); }
  EXPECT_EQ(d, reference(DType::kF32, ReduceOp::kSum, w.size(), 503, 77));
}

TEST(MpiCollectives, BadArgumentsAreClearErrors) {
  // Checked before any message is sent, identically on every rank.
  Communicator& w = world();
  std::vector<uint16_t> u(4);
  try {
    w.all_reduce(Tensor(u.data(), DType::kU16, Device::kCPU, {4}));
    ADD_FAILURE() << "u16 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("collectives take f32, f64, bf16 or i32"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("communicator 'world'"), std::string::npos) << e.what();
  }
  std::vector<float> x(6), y(5);
  try {
    w.reduce_scatter(Tensor(y.data(), DType::kF32, Device::kCPU, {5}), Tensor(x.data(), DType::kF32, Device::kCPU, {6}));
    ADD_FAILURE() << "size mismatch accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("chunks of out's 5 elements"), std::string::npos) << e.what();
  }
  float fake_gpu_memory = 0;
  EXPECT_THROW(w.all_reduce(Tensor(&fake_gpu_memory, DType::kF32, Device::kCUDA, {1})), Error);
  EXPECT_THROW(w.broadcast(Tensor(x.data(), DType::kF32, Device::kCPU, {6}), w.size()), Error);
  std::vector<int32_t> i(3);
  EXPECT_THROW(w.all_reduce(Tensor(i.data(), DType::kI32, Device::kCPU, {3}), ReduceOp::kAvg), Error);
  w.barrier();
}

}  // namespace
}  // namespace dt::mpitest
