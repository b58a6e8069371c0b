// A config whose model cannot fit is refused before anything is allocated, with the keys that size
// it named, instead of failing inside the allocator.
//
// The estimate per rank: parameters, gradients and AdamW's two moments in fp32 (16 bytes a
// parameter; the moments / dp under ZeRO-1), the parameters split over tp; activations roughly
// batch x seq_len x layers x (16 d_model + 4 d_ff) fp32 values, plus the logits and their gradient
// (batch x seq_len x vocab / tp, twice). It is a lower bound of what training uses; evaluation
// counts the parameters and activations only. The memory: the GPU's free memory, or the host's
// MemAvailable (/proc/meminfo; sysconf's available pages elsewhere).
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "trainer/config.h"

namespace dt {

struct MemoryEstimate {
  int64_t parameters = 0;  // this rank's
  uint64_t state_bytes = 0;       // parameters (+ gradients and moments when training)
  uint64_t activation_bytes = 0;
  uint64_t total() const { return state_bytes + activation_bytes; }
};

MemoryEstimate estimate_memory(const ModelConfig& m, int batch, int seq_len, int tp, int dp, bool zero1,
                               bool training);

// Bytes available on `device` now: the GPU's free memory, the host's MemAvailable.
uint64_t available_memory(Device device);

// Throws dt::Error naming the keys when the estimate exceeds `available` bytes.
void check_memory_fits(const ModelConfig& m, int batch, int seq_len, int tp, int dp, bool zero1, bool training,
                       Device device, uint64_t available);

// check_memory_fits for a training run of `cfg` on `device`, with the memory it has now.
void check_training_memory(const Config& cfg, Device device, int tp, int dp);

}  // namespace dt
