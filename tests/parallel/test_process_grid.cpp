#include <gtest/gtest.h>

#include <set>

#include "core/error.h"
#include "parallel/process_grid.h"

namespace dt {
namespace {

TEST(ProcessGrid, TpRanksAreAdjacent) {
  // world 8 = tp 2 x dp 4: rank = dp_rank * tp + tp_rank.
  std::set<std::pair<int, int>> seen;
  for (int r = 0; r < 8; ++r) {
    ProcessGrid g(r, 8, 2);
    EXPECT_EQ(g.tp_size(), 2);
    EXPECT_EQ(g.dp_size(), 4);
    EXPECT_EQ(g.tp_rank(), r % 2);
    EXPECT_EQ(g.dp_rank(), r / 2);
    EXPECT_EQ(g.tp_peer(g.tp_rank()), r);
    EXPECT_EQ(g.dp_peer(g.dp_rank()), r);
    EXPECT_EQ(g.tp_peer(0) / 2, g.tp_peer(1) / 2);  // one TP group shares a dp_rank
    seen.insert({g.tp_rank(), g.dp_rank()});
  }
  EXPECT_EQ(seen.size(), 8u);  // every (tp, dp) coordinate exactly once
}

TEST(ProcessGrid, RejectsLayoutsThatDoNotFit) {
  EXPECT_THROW(ProcessGrid(0, 6, 4), Error);   // 4 does not divide 6
  EXPECT_THROW(ProcessGrid(0, 4, 0), Error);
  EXPECT_THROW(ProcessGrid(4, 4, 2), Error);   // rank outside the world
  EXPECT_THROW(ProcessGrid(0, 0, 1), Error);
  try {
    ProcessGrid(0, 6, 4);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("parallel.tp = 4 does not divide the 6 ranks"), std::string::npos);
  }
}

}  // namespace
}  // namespace dt
