#include "parallel/process_grid.h"

#include "core/error.h"

namespace dt {

ProcessGrid::ProcessGrid(int rank, int world_size, int tp) : rank_(rank), world_(world_size), tp_(tp) {
  DT_CHECK(world_size >= 1, "world size must be at least 1, got {}", world_size);
  DT_CHECK(tp >= 1 && world_size % tp == 0,
           "parallel.tp = {} does not divide the {} ranks launched; launch a multiple of tp ranks "
           "(mpirun -np N) or change parallel.tp", tp, world_size);
  DT_CHECK(rank >= 0 && rank < world_size, "rank {} outside a world of {}", rank, world_size);
}

}  // namespace dt
