// Upper bounds on config values that are valid integers but cannot be meant: a grad_accum of a
// billion micro-steps, a million threads. Checked with the other rules when a config is read.
#pragma once

#include <string>
#include <vector>

#include "trainer/config.h"

namespace dt {

inline constexpr int kMaxGradAccum = 65536;
inline constexpr int kMaxThreads = 4096;

// One message per value out of bounds (empty: all within), each naming the key, the value and the bound.
std::vector<std::string> config_limit_errors(const Config& c);

}  // namespace dt
