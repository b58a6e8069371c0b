#include "trainer/config_limits.h"

#include <fmt/format.h>

namespace dt {

std::vector<std::string> config_limit_errors(const Config& c) {
  std::vector<std::string> errs;
  if (c.train.grad_accum > kMaxGradAccum)
    errs.push_back(fmt::format("train.grad_accum = {} must be <= {}: raise train.batch_size instead, or split the "
                               "run",
                               c.train.grad_accum, kMaxGradAccum));
  if (c.run.threads > kMaxThreads)
    errs.push_back(fmt::format("run.threads = {} must be <= {} (0 uses all cores)", c.run.threads, kMaxThreads));
  return errs;
}

}  // namespace dt
