#include "infer/l2_plan.h"

#include <algorithm>

#include "core/error.h"

namespace dt {

namespace {
constexpr int64_t kDistance = 2;  // a GEMV prefetches the weights of the GEMV this many further on
}

void L2Plan::add(const std::vector<Tensor>& weights) {
  DT_CHECK(!weights.empty() && weights.front().defined(), "decode: a GEMV of the L2 plan without weights");
  std::vector<Tensor> group;
  int64_t left = kL2PrefetchMaxBytes;
  for (const Tensor& w : weights) {
    if (left <= 0) break;
    const int64_t row = w.numel() / w.size(0) * static_cast<int64_t>(dtype_size(w.dtype));
    const int64_t rows = std::min(w.size(0), left / row);
    if (rows <= 0) break;
    group.push_back(w.narrow0(0, rows));
    left -= rows * row;
  }
  index_.emplace(weights.front().data, groups_.size());
  groups_.push_back(std::move(group));
}

const std::vector<Tensor>& L2Plan::none() {
  static const std::vector<Tensor> kNone;
  return kNone;
}

const std::vector<Tensor>& L2Plan::after(const Tensor& w) const {
  const auto it = index_.find(w.data);
  if (it == index_.end()) return none();
  return groups_[(it->second + kDistance) % groups_.size()];
}

}  // namespace dt
