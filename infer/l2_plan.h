// The weights of a decode step's GEMVs in the order the step runs them, and for each GEMV the
// weights it asks L2 to fetch while it runs (decode_gemv's `l2`): those of the GEMV two further on,
// wrapping from the LM head to the next step's first GEMVs. At one token a step the GEMVs are
// chained by their latency, and a GEMV's weights come from memory only once its CTAs start; with
// this prefetch they are in L2 by then. A group is capped at kL2PrefetchMaxBytes (the LM head: its
// first rows, which its GEMV reads first); the groups in flight stay far below L2's 50 MB.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"

namespace dt {

inline constexpr int64_t kL2PrefetchMaxBytes = 16 << 20;

class L2Plan {
 public:
  // The next GEMV of the step: its weights (the first names it), in the order the step runs them.
  void add(const std::vector<Tensor>& weights);
  // What the GEMV whose first weight is w prefetches; none() for a weight the plan does not hold.
  const std::vector<Tensor>& after(const Tensor& w) const;
  static const std::vector<Tensor>& none();

 private:
  std::vector<std::vector<Tensor>> groups_;
  std::unordered_map<const void*, size_t> index_;  // first weight's data -> its group
};

}  // namespace dt
