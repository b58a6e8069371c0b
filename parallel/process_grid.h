// ProcessGrid: world = tp x dp, TP ranks adjacent (docs/parallel.md, "Groups"), so that a
// TP group sits inside one node. rank = dp_rank * tp + tp_rank.
#pragma once

namespace dt {

class ProcessGrid {
 public:
  // Throws a dt::Error unless world_size == tp * dp and 0 <= rank < world_size.
  ProcessGrid(int rank, int world_size, int tp);

  int rank() const { return rank_; }
  int world_size() const { return world_; }
  int tp_size() const { return tp_; }
  int dp_size() const { return world_ / tp_; }
  int tp_rank() const { return rank_ % tp_; }
  int dp_rank() const { return rank_ / tp_; }
  // World rank of the member `i` of this rank's TP group / DP group.
  int tp_peer(int i) const { return dp_rank() * tp_ + i; }
  int dp_peer(int i) const { return i * tp_ + tp_rank(); }

 private:
  int rank_, world_, tp_;
};

}  // namespace dt
