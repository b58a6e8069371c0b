// Shared by the GPU suites of the dense elementwise ops, embedding and optimizer
// (test_dense_elem_cuda.cpp, test_dense_embed_optim_cuda.cpp): the run's Philox seed, random
// inputs, and the comparisons against the CPU references.
//
// Inputs are fresh Philox normals each run (the seed is printed on failure; DT_TEST_SEED=<n>
// replays it), rounded to bf16 where the GPU takes bf16, so the GPU and the reference see the same
// numbers. The truth is the reference run in double on those inputs. Every GPU output is poisoned
// with NaN before each run (accumulated outputs start from random nonzero values instead).
//
// Tolerances, from the reference's own error in the output dtype:
//   - a bf16 output is an fp32 result rounded once; bf16 keeps 8 significant bits, so rounding
//     moves x by at most 2^-8 |x|. We allow twice that, |got - want| <= 2^-7 |want|, plus a floor
//     of 1e-5 x RMS(want) for the fp32 error (~1e-7 of the terms) of outputs that cancel to ~0.
//   - fp32 outputs: rstd 1e-5 relative (a few fp32 roundings); dw sums 1e-5 x sum of |terms|
//     (fp32 summation over <= ~40 sequential adds per element is < 3e-6 of it);
//     sum_squares 1e-6 relative (each fp32 term is a sum of 4 squares, < 3 x 2^-24, then double);
//     AdamW 1e-6 relative (it is computed in double in the CPU's order and should match bitwise).
//   - copies (embedding forward, head concat / split without a sum, cast, scale) must be exact.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/philox.h"
#include "tests/gpu/gpu_testing.h"

namespace dt::dense_elem_test {

using gpu_testing::gpu_context;
using gpu_testing::run_seed;


inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kBf16Rel = 1.0 / 128;  // 2 x bf16's rounding bound 2^-8
inline constexpr double kFloorRel = 1e-5;      // x RMS of the output



// n normals * scale from the Philox stream named `name` (+ a case index), rounded to bf16 if asked.
inline std::vector<float> randn(int64_t n, const std::string& name, double scale = 1.0, bool bf16 = true) {
  const uint64_t stream = philox_stream_of(name.c_str());
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) {
    const float f = static_cast<float>(scale * philox_normal(run_seed(), stream, static_cast<uint64_t>(i)));
    x[i] = bf16 ? round_bf16(f) : f;
  }
  return x;
}


inline double rms(const std::vector<double>& x) {
  double s = 0;
  for (double v : x) s += v * v;
  return x.empty() ? 0.0 : std::sqrt(s / static_cast<double>(x.size()));
}

// Every element: |got - want| <= rel |want| + floor[i] (floor_all when `floors` is empty).
inline void expect_close(const std::string& what, const std::vector<float>& got, const std::vector<double>& want, double rel,
                  double floor_all, const std::vector<double>& floors = {}) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int64_t bad = 0, nonfinite = 0, worst = -1;
  double worst_excess = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) {
      ++nonfinite;
      continue;
    }
    const double err = std::fabs(got[i] - want[i]);
    const double tol = rel * std::fabs(want[i]) + (floors.empty() ? floor_all : floors[i]);
    if (err > tol) {
      ++bad;
      if (worst < 0 || err / tol > worst_excess) worst_excess = err / tol, worst = static_cast<int64_t>(i);
    }
  }
  EXPECT_EQ(nonfinite, 0) << what << ": " << nonfinite << " of " << got.size()
                          << " elements are NaN/inf (unwritten: outputs were poisoned with NaN)";
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " elements beyond tolerance (" << rel
                    << " relative + floor); worst at flat index " << worst << ": got "
                    << (worst >= 0 ? got[worst] : 0.f) << ", want " << (worst >= 0 ? want[worst] : 0.0) << " ("
                    << worst_excess << " x the tolerance)";
}

inline void expect_close_bf16(const std::string& what, const std::vector<float>& got, const std::vector<double>& want) {
  expect_close(what, got, want, kBf16Rel, kFloorRel * rms(want));
}

inline void expect_bits_equal(const std::string& what, const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  ASSERT_EQ(a.size(), b.size()) << what;
  EXPECT_TRUE(a == b) << what << " differs between two runs on the same inputs (not deterministic)";
}

inline void expect_exact(const std::string& what, const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], 4) != 0 && !(std::isnan(got[i]) && std::isnan(want[i]))) {
      if (first < 0) first = static_cast<int64_t>(i);
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " elements differ from the exact result; first at "
                    << first << ": got " << (first >= 0 ? got[first] : 0.f) << ", want "
                    << (first >= 0 ? want[first] : 0.f);
}

}  // namespace dt::dense_elem_test
