// TP and DP groups split from a ProcessGrid, and the TP mappings forward and backward: a
// column-parallel then row-parallel linear pair (Megatron's MLP pattern) sharded over the TP group
// against the same pair computed whole on one rank, in double.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "parallel/process_groups.h"
#include "parallel/tp_mappings.h"
#include "tests/mpi/mpi_test_util.h"

namespace dt::mpitest {
namespace {

// Every TP size that divides the world: 1, 2, (4), world.
std::vector<int> tp_sizes(int world) {
  std::vector<int> out;
  for (int tp = 1; tp <= world; ++tp)
    if (world % tp == 0) out.push_back(tp);
  return out;
}

TEST(MpiGroups, SplitFollowsTheProcessGrid) {
  Communicator& w = world();
  for (int tp : tp_sizes(w.size())) {
    ProcessGrid grid(w.rank(), w.size(), tp);
    ProcessGroups g = make_process_groups(w, grid);
    EXPECT_EQ(g.tp->size(), tp);
    EXPECT_EQ(g.tp->rank(), grid.tp_rank());
    EXPECT_EQ(g.dp->size(), w.size() / tp);
    EXPECT_EQ(g.dp->rank(), grid.dp_rank());
    EXPECT_EQ(g.tp->name(), "tp");
    // Who is in each group: all-gather the world ranks.
    std::vector<int32_t> tp_members(tp, -1), dp_members(grid.dp_size(), -1);
    int32_t me = w.rank();
    g.tp->all_gather(Tensor(tp_members.data(), DType::kI32, Device::kCPU, {tp}),
                     Tensor(&me, DType::kI32, Device::kCPU, {1}));
    g.dp->all_gather(Tensor(dp_members.data(), DType::kI32, Device::kCPU, {grid.dp_size()}),
                     Tensor(&me, DType::kI32, Device::kCPU, {1}));
    for (int i = 0; i < tp; ++i) EXPECT_EQ(tp_members[i], grid.tp_peer(i)) << "tp " << tp;
    for (int i = 0; i < grid.dp_size(); ++i) EXPECT_EQ(dp_members[i], grid.dp_peer(i)) << "tp " << tp;
    // The groups are independent: a sum in one stays in it.
    int32_t s = w.rank();
    g.tp->all_reduce(Tensor(&s, DType::kI32, Device::kCPU, {1}));
    int32_t expected = 0;
    for (int i = 0; i < tp; ++i) expected += grid.tp_peer(i);
    EXPECT_EQ(s, expected) << "tp " << tp;
  }
}

TEST(MpiGroups, GridMustMatchTheWorld) {
  ProcessGrid wrong(0, 1, 1);
  EXPECT_THROW(make_process_groups(world(), wrong), Error);
}

// Row-major dense helpers in double: C[m, n] = A[m, k] B[k, n] (with optional transposes).
std::vector<double> matmul(const std::vector<double>& a, const std::vector<double>& b, int m, int k, int n,
                           bool ta = false, bool tb = false) {
  std::vector<double> c(static_cast<size_t>(m) * n, 0.0);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int p = 0; p < k; ++p) s += (ta ? a[p * m + i] : a[i * k + p]) * (tb ? b[j * k + p] : b[p * n + j]);
      c[i * n + j] = s;
    }
  return c;
}
std::vector<double> random_matrix(int c, int rows, int cols) {
  std::vector<double> m(static_cast<size_t>(rows) * cols);
  for (size_t i = 0; i < m.size(); ++i) m[i] = philox_normal(0xABCu, c, i);  // the same on every rank
  return m;
}
// Columns [c0, c0 + n) of a row-major [rows, cols] matrix.
std::vector<double> columns(const std::vector<double>& m, int rows, int cols, int c0, int n) {
  std::vector<double> out(static_cast<size_t>(rows) * n);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < n; ++j) out[i * n + j] = m[i * cols + c0 + j];
  return out;
}
double max_rel_err(const std::vector<double>& x, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    num = std::max(num, std::abs(x[i] - ref[i]));
    den = std::max(den, std::abs(ref[i]));
  }
  return num / den;
}
Tensor t2(std::vector<double>& v, int rows, int cols) { return Tensor(v.data(), DType::kF64, Device::kCPU, {rows, cols}); }

TEST(MpiTpMappings, ColumnThenRowParallelPairMatchesTheWholeLayer) {
  // Z = (X A) B, X [R, I], A [I, F], B [F, O]; F splits over TP (F = 12 divides 1, 2, 3, 4).
  // Loss = sum(Z * G): dZ = G, dY = G B^T, dX = dY A^T.
  const int R = 5, I = 6, F = 12, O = 7;
  std::vector<double> X = random_matrix(1, R, I), A = random_matrix(2, I, F), B = random_matrix(3, F, O),
                      G = random_matrix(4, R, O);
  const std::vector<double> Y = matmul(X, A, R, I, F), Z = matmul(Y, B, R, F, O);
  const std::vector<double> dY = matmul(G, B, R, O, F, false, true), dX = matmul(dY, A, R, F, I, false, true);
  Communicator& w = world();
  for (int tp : tp_sizes(w.size())) {
    ProcessGrid grid(w.rank(), w.size(), tp);
    ProcessGroups g = make_process_groups(w, grid);
    const int f = F / tp, r = grid.tp_rank();
    // A_local: columns [r f, (r+1) f) of A; B_local: rows [r f, (r+1) f) of B.
    std::vector<double> A_local = columns(A, I, F, r * f, f);
    std::vector<double> B_local(B.begin() + r * f * O, B.begin() + (r + 1) * f * O);
    // Forward.
    copy_to_tp_region_forward(*g.tp, t2(X, R, I));
    std::vector<double> Y_local = matmul(X, A_local, R, I, f);
    std::vector<double> Z_sharded = matmul(Y_local, B_local, R, f, O);  // this rank's partial sum
    reduce_from_tp_region_forward(*g.tp, t2(Z_sharded, R, O));
    EXPECT_LT(max_rel_err(Z_sharded, Z), 1e-13) << "tp " << tp;
    EXPECT_TRUE(same_bytes_on_all_ranks(Z_sharded.data(), Z_sharded.size() * sizeof(double)));
    // The gathered Y_local is the whole Y, exactly (copies only).
    std::vector<double> Y_gathered(R * F, std::nan(""));
    gather_from_tp_region_forward(*g.tp, t2(Y_gathered, R, F), t2(Y_local, R, f));
    EXPECT_LT(max_rel_err(Y_gathered, Y), 1e-15) << "tp " << tp;
    // Backward.
    std::vector<double> dZ = G;
    reduce_from_tp_region_backward(*g.tp, t2(dZ, R, O));
    std::vector<double> dY_local = matmul(dZ, B_local, R, O, f, false, true);
    std::vector<double> dX_sharded = matmul(dY_local, A_local, R, f, I, false, true);
    copy_to_tp_region_backward(*g.tp, t2(dX_sharded, R, I));
    EXPECT_LT(max_rel_err(dX_sharded, dX), 1e-13) << "tp " << tp;
    EXPECT_EQ(dY_local, columns(dY, R, F, r * f, f)) << "tp " << tp;  // the same products, the same bits
  }
}

TEST(MpiTpMappings, GatherAndScatterAlongTheLastDim) {
  Communicator& w = world();
  for (int tp : tp_sizes(w.size())) {
    ProcessGrid grid(w.rank(), w.size(), tp);
    ProcessGroups g = make_process_groups(w, grid);
    const int rows = 3 * 5, n_local = 3, n = n_local * tp, r = grid.tp_rank();
    // x [3, 5, n]: element (i, j) = 1000 i + j, so every value says where it belongs.
    std::vector<float> x(rows * n), x_local(rows * n_local, std::nanf("")), back(rows * n, std::nanf(""));
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < n; ++j) x[i * n + j] = 1000.0f * i + j;
    Tensor X(x.data(), DType::kF32, Device::kCPU, {3, 5, n});
    Tensor XL(x_local.data(), DType::kF32, Device::kCPU, {3, 5, n_local});
    scatter_to_tp_region_forward(*g.tp, XL, X);
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < n_local; ++j) EXPECT_EQ(x_local[i * n_local + j], 1000.0f * i + r * n_local + j);
    // Its backward gathers the parts back into the whole; gather's backward slices again.
    scatter_to_tp_region_backward(*g.tp, Tensor(back.data(), DType::kF32, Device::kCPU, {3, 5, n}), XL);
    EXPECT_EQ(back, x) << "tp " << tp;
    std::vector<float> sliced(rows * n_local, std::nanf(""));
    gather_from_tp_region_backward(*g.tp, Tensor(sliced.data(), DType::kF32, Device::kCPU, {3, 5, n_local}), X);
    EXPECT_EQ(sliced, x_local) << "tp " << tp;
    // A part whose last dim does not match the split is refused (on every rank alike).
    std::vector<float> odd(rows * (n_local + 1));
    EXPECT_THROW(gather_from_tp_region_forward(*g.tp, X, Tensor(odd.data(), DType::kF32, Device::kCPU,
                                                                {3, 5, n_local + 1})),
                 Error);
  }
}

}  // namespace
}  // namespace dt::mpitest
