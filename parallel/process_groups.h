// The TP and DP communicators of one rank (docs/parallel.md, "Groups"): made from the world
// communicator and a ProcessGrid, held by whoever runs the model and passed down, never looked up
// (no global process-group state: docs/architecture.md, "Conventions").
//
//   world 8 = tp 2 x dp 4:  TP groups {0,1} {2,3} {4,5} {6,7};  DP groups {0,2,4,6} {1,3,5,7}
#pragma once

#include <memory>

#include "parallel/communicator.h"
#include "parallel/process_grid.h"

namespace dt {

struct ProcessGroups {
  std::unique_ptr<Communicator> tp;  // this rank's TP group, ranked by tp_rank
  std::unique_ptr<Communicator> dp;  // this rank's DP group, ranked by dp_rank
};

// Collective over world (every rank calls it). world must be the whole grid: its size is
// grid.world_size() and its rank grid.rank().
ProcessGroups make_process_groups(Communicator& world, const ProcessGrid& grid);

}  // namespace dt
