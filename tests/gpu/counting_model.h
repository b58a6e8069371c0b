// A model trained for a few seconds on counting sequences ((start + 3 t) mod V), so that its next
// tokens are confident, as a trained checkpoint's are: the GPU decode tests compare greedy tokens
// of the CPU and the GPU on it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include "core/philox.h"
#include "layers/model.h"
#include "trainer/adamw.h"
#include "trainer/runtime.h"

namespace dt::infer_cuda_testing {

// A model of cfg made [8, 64] on the GPU, initialised with seed 7 and trained `steps` AdamW steps
// on counting sequences; prints the loss before and after.
inline std::unique_ptr<Model> train_counting_model(Runtime& rt, const ModelConfig& cfg, int steps = 60) {
  const int V = cfg.vocab_size, B = 8, T = 64;
  auto trained = std::make_unique<Model>(cfg, B, T, DType::kF32, Device::kCUDA);
  trained->init(7);
  AdamW opt(trained->params(), {0.9, 0.95, 1e-8, 0.1});
  std::vector<int32_t> in(static_cast<size_t>(B) * T), tgt(in.size());
  double first = 0, last = 0;
  for (int step = 0; step < steps; ++step) {
    for (int b = 0; b < B; ++b) {
      const int start = static_cast<int>(philox_uniform(99, step, b) * V);
      for (int t = 0; t < T; ++t) {
        in[b * T + t] = (start + 3 * t) % V;
        tgt[b * T + t] = (start + 3 * (t + 1)) % V;
      }
    }
    trained->params().zero_grads();
    last = trained->forward(rt.ctx(), in.data(), tgt.data());
    if (step == 0) first = last;
    trained->backward(rt.ctx(), 1.0);
    clip_grad_norm(rt.ctx(), trained->params(), 1.0);
    opt.step(rt.ctx(), 3e-3);
  }
  std::printf("training: loss %.4f -> %.4f in %d steps\n", first, last, steps);
  return trained;
}

// 20 tokens of a counting sequence the model has not seen whole.
inline std::vector<int32_t> counting_prompt(int V) {
  std::vector<int32_t> prompt;
  for (int t = 0; t < 20; ++t) prompt.push_back((17 + 3 * t) % V);
  return prompt;
}

}  // namespace dt::infer_cuda_testing
