// Rules on a config that depend on the device it runs on. validate_config (trainer/config.h) checks
// the rules between config values when a config is read; the device may be chosen only at run time
// (run.device / --device: auto is the GPU when there is one), so the GPU kernels' limits are checked
// here, once the device is resolved:
//
//   const Device device = resolve_device(cfg.run.device);
//   validate_config_for_device(cfg.model, device, /*training=*/true);
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"
#include "layers/model_config.h"

namespace dt {

// What the GPU kernels of the Gated DeltaNet layers take (checked again by their launchers):
// chunks of 1 to kGpuGdnMaxChunk tokens (kMaxChunk in kernels/cuda/gdn_chunk.cuh), head dims that
// are multiples of kGpuGdnHeadDimStep up to kGpuGdnMaxHeadDim (kDimStep, kMaxDim there: the chunked
// and recurrent kernels and the l2norms; dk may differ from dv), convolutions up to
// kGpuGdnMaxConvKernel wide (kMaxK in kernels/cuda/gdn_conv.cu). The token-by-token recurrence
// (chunk_size 0) has a GPU forward but no GPU backward. tests/trainer/test_gpu_limits.cpp reads
// those constants back from the kernels' sources.
inline constexpr int kGpuGdnMaxChunk = 64;
inline constexpr int kGpuGdnHeadDimStep = 8;
inline constexpr int kGpuGdnMaxHeadDim = 128;
inline constexpr int kGpuGdnMaxConvKernel = 8;

// One message per model key the device cannot run (empty: it can, and always on the CPU), each naming
// the key, the value, the limit and the way out. training: the backward runs too (train), not only
// the forward (eval).
std::vector<std::string> device_limit_errors(const ModelConfig& m, Device device, bool training);

// Throws a dt::Error listing device_limit_errors when there are any.
void validate_config_for_device(const ModelConfig& m, Device device, bool training);

}  // namespace dt
