#include "parallel/process_groups.h"

#include "core/error.h"

namespace dt {

ProcessGroups make_process_groups(Communicator& world, const ProcessGrid& grid) {
  DT_CHECK(world.size() == grid.world_size() && world.rank() == grid.rank(),
           "process grid (rank {} of {}, tp {}) does not match communicator '{}' (rank {} of {}); build the grid "
           "from the world communicator's rank and size",
           grid.rank(), grid.world_size(), grid.tp_size(), world.name(), world.rank(), world.size());
  ProcessGroups g;
  // Same color = same group; every rank takes part in both splits, in this order.
  g.tp = world.split(grid.dp_rank(), grid.tp_rank(), "tp");
  g.dp = world.split(grid.tp_rank(), grid.dp_rank(), "dp");
  DT_ASSERT(g.tp->size() == grid.tp_size() && g.tp->rank() == grid.tp_rank());
  DT_ASSERT(g.dp->size() == grid.dp_size() && g.dp->rank() == grid.dp_rank());
  return g;
}

}  // namespace dt
