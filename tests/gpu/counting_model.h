// What the GPU decode tests share to compare greedy tokens of the CPU and the GPU: a model trained
// for a few seconds on counting sequences ((start + 3 t) mod V), whose next tokens are confident as a
// trained checkpoint's are; its weights in an engine on each device; and the check of where the
// two devices' tokens part.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/philox.h"
#include "infer/engine.h"
#include "layers/model.h"
#include "trainer/adamw.h"
#include "trainer/runtime.h"

namespace dt::infer_cuda_testing {

// The master weights of `from` into `to` (same config), and `to`'s compute copies from them.
inline void copy_masters(ParamStore& from, ParamStore& to) {
  Arena &src = from.params_arena(), &dst = to.params_arena();
  ASSERT_EQ(src.bytes(), dst.bytes());
  device_copy(dst.base(), dst.device(), src.base(), src.device(), src.bytes());
  to.sync_compute();
}

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

// A trained model's weights in an engine on the CPU (fp32) and one on the GPU.
struct EnginePair {
  Model cpu_w, gpu_w;
  Engine cpu, gpu;
  EnginePair(const ModelConfig& cfg, Model& trained)
      : cpu_w(cfg, 1, 1), gpu_w(cfg, 1, 1, DType::kF32, Device::kCUDA), cpu(cfg, cpu_w.params()),
        gpu(cfg, gpu_w.params()) {
    copy_masters(trained.params(), cpu_w.params());
    copy_masters(trained.params(), gpu_w.params());
  }
};

// The CPU's greedy tokens a and the GPU's b of `prompt` agree, or the first that differs is a near-tie
// of the CPU's logits there (margin at most rtol of their largest magnitude); prints which.
inline void expect_same_or_near_tie(Engine& cpu, const std::vector<int32_t>& prompt, const std::vector<int32_t>& a,
                                    const std::vector<int32_t>& b, MlaCache cache, double rtol,
                                    const std::string& what) {
  const auto split = std::mismatch(a.begin(), a.end(), b.begin());
  if (split.first == a.end()) {
    std::printf("%s: CPU and GPU agree on all %zu greedy tokens\n", what.c_str(), a.size());
    return;
  }
  const int64_t i = split.first - a.begin();
  Context cpu_ctx;
  auto state = cpu.new_state(1, static_cast<int64_t>(prompt.size()) + i + 1, cache);
  std::vector<float> l = cpu.prefill(cpu_ctx, prompt, *state);
  for (int64_t j = 0; j < i; ++j) l = cpu.step(cpu_ctx, std::span(&a[j], 1), *state);
  double scale = 1;
  for (float x : l) scale = std::max(scale, std::fabs(double(x)));
  const double margin = double(l[*split.first]) - double(l[*split.second]);
  std::printf("%s: CPU and GPU part at greedy token %lld: CPU %d, GPU %d, CPU logit margin %.4e (%.2e of the scale)\n",
              what.c_str(), static_cast<long long>(i), *split.first, *split.second, margin, margin / scale);
  EXPECT_LE(margin / scale, rtol) << what << ": the CPU and the GPU part at token " << i
                                  << " where the CPU's choice is not a near-tie";
}

}  // namespace dt::infer_cuda_testing
