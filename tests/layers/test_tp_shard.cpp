// ParamStore under tensor parallelism: local shapes, the parts of a whole tensor (one block, several
// blocks as GDN's [q | k | v], row splits), and an init that gives each rank its part of the
// one-process values. The TP forward/backward itself runs under mpirun (tests/mpi/test_mpi_tp.cpp).
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "layers/params.h"

namespace dt {
namespace {

TEST(TpShard, ColumnSplitWithBlocksTakesPartOfEveryBlock) {
  // [q (4 rows) | k (4) | v (6)] x 3 columns; rank 1 of 2 takes rows 2-3, 6-7, 11-13.
  ParamInfo p{"w", {14, 3}, Init::kNormal, 0.02, TpSplit::kColumn, true};
  p.tp_blocks = {4, 4, 6};
  p.full_shape = p.shape;
  std::vector<float> full(42), part(21, -1.0f), back(42, -1.0f);
  std::iota(full.begin(), full.end(), 0.0f);
  tp_copy_part(p, {1, 2}, full.data(), part.data(), sizeof(float), /*to_part=*/true);
  const int rows[] = {2, 3, 6, 7, 11, 12, 13};
  for (int i = 0; i < 7; ++i)
    for (int j = 0; j < 3; ++j) EXPECT_EQ(part[i * 3 + j], full[rows[i] * 3 + j]) << i << "," << j;
  // Both ranks' parts put back make the whole tensor again.
  tp_copy_part(p, {1, 2}, back.data(), part.data(), sizeof(float), /*to_part=*/false);
  tp_copy_part(p, {0, 2}, full.data(), part.data(), sizeof(float), /*to_part=*/true);
  tp_copy_part(p, {0, 2}, back.data(), part.data(), sizeof(float), /*to_part=*/false);
  EXPECT_EQ(back, full);
}

TEST(TpShard, RowSplitTakesColumns) {
  ParamInfo p{"w", {3, 8}, Init::kNormal, 0.02, TpSplit::kRow, true};
  p.full_shape = p.shape;
  std::vector<float> full(24), part(6);
  std::iota(full.begin(), full.end(), 0.0f);
  tp_copy_part(p, {3, 4}, full.data(), part.data(), sizeof(float), true);
  EXPECT_EQ(part, (std::vector<float>{6, 7, 14, 15, 22, 23}));
}

TEST(TpShard, StoreHoldsPartsInitialisedFromTheWholeTensor) {
  ParamStore whole(DType::kF32, Device::kCPU);
  ParamStore part(DType::kF32, Device::kCPU, {2, 3});
  for (ParamStore* ps : {&whole, &part}) {
    ParamInfo qkv{"layer.in_proj_qkv.weight", {12, 5}, Init::kNormal, 0.02, TpSplit::kColumn, true};
    qkv.tp_blocks = {3, 3, 6};
    ps->declare(qkv);
    ps->declare({"layer.out_proj.weight", {5, 9}, Init::kNormal, 0.02, TpSplit::kRow, true});
    ps->declare({"layer.norm.weight", {7}, Init::kOnes, 0.0, TpSplit::kReplicated, false});
    ps->allocate();
    ps->init(11);
  }
  EXPECT_EQ(part.infos()[0].shape, Shape({4, 5}));
  EXPECT_EQ(part.infos()[0].full_shape, Shape({12, 5}));
  EXPECT_EQ(part.infos()[1].shape, Shape({5, 3}));
  EXPECT_EQ(part.infos()[2].shape, Shape({7}));
  for (int s = 0; s < 3; ++s) {
    const ParamInfo& info = part.infos()[s];
    std::vector<float> want(info.shape.numel());
    tp_copy_part(info, part.tp(), whole.master(s).data, want.data(), sizeof(float), true);
    const float* got = part.master(s).ptr<float>();
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << info.name << " " << i;
  }
}

TEST(TpShard, ABlockThatDoesNotDivideIsAClearError) {
  ParamStore ps(DType::kF32, Device::kCPU, {0, 4});
  ParamInfo p{"model.layers.0.linear_attn.in_proj_qkv.weight", {10, 2}, Init::kNormal, 0.02, TpSplit::kColumn, true};
  p.tp_blocks = {4, 4, 2};
  try {
    ps.declare(p);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("in_proj_qkv.weight"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("parallel.tp"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dt
