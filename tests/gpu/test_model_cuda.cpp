// The model on the GPU (bf16 mixed precision) against the CPU: the golden Hugging Face files
// within bf16 tolerance, and a 20-step training run whose losses track the CPU fp32 run's.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/device.h"
#include "core/philox.h"
#include "layers/attention.h"
#include "layers/gdn.h"
#include "layers/model.h"
#include "tests/trainer/golden_io.h"
#include "tests/trainer/golden_qwen35.h"
#include "trainer/adamw.h"
#include "trainer/runtime.h"

namespace dt {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device present"

// bf16 keeps 8 significant bits (unit roundoff 2^-9 = 2e-3 per rounding); activations are rounded
// at every op boundary of a forward (about 10 of them per layer), gradients again in the backward.
// Measured errors are printed by ErrorTable; the CPU fp32 path meets 1e-5 / 1e-4 on the same files.
constexpr double kTolOut = 2e-2;
constexpr double kTolGrad = 5e-2;

TEST(GoldenCuda, GatedAttentionLayer) {
  SKIP_WITHOUT_GPU();
  Runtime rt(Device::kCUDA);
  golden::check_layer<Attention>("qwen35_attn_layer.h5", "qwen35 Attention on the GPU (bf16)",
                                 golden::model_config_from_qwen35, [](ModelConfig&) {}, kTolOut, kTolGrad, &rt.ctx());
}

TEST(GoldenCuda, GatedDeltaNetLayer) {
  SKIP_WITHOUT_GPU();
  Runtime rt(Device::kCUDA);
  golden::check_layer<GatedDeltaNet>("qwen35_gdn_layer.h5", "qwen35 GatedDeltaNet on the GPU (bf16, chunk 64)",
                                     golden::model_config_from_qwen35, [](ModelConfig& c) { c.gdn.chunk_size = 64; },
                                     kTolOut, kTolGrad, &rt.ctx());
}

TEST(GoldenCuda, WholeModel) {
  SKIP_WITHOUT_GPU();
  golden::GoldenFile f(golden::golden_path("qwen35_model.h5"));
  ModelConfig cfg = golden::model_config_from_qwen35(nlohmann::json::parse(f.attr_string("config_json")));
  std::vector<int64_t> shape = f.shape("input_ids");
  ASSERT_EQ(shape.size(), 2u);
  const int B = static_cast<int>(shape[0]), T = static_cast<int>(shape[1]);
  std::vector<int32_t> inputs = f.read<int32_t>("input_ids"), targets = f.read<int32_t>("target_ids");
  Runtime rt(Device::kCUDA);
  Model model(cfg, B, T, DType::kF32, Device::kCUDA);
  ASSERT_TRUE(golden::load_params(f, model.params()));
  model.params().zero_grads();
  const double loss = model.forward(rt.ctx(), inputs.data(), targets.data());
  model.backward(rt.ctx(), 1.0);
  // The loss matches to bf16 precision; the gradients far less well, measured 2-27% (H200,
  // 2026-11-29): the 240-word softmax of this random model is near uniform, so dlogits = p - onehot
  // (bf16, |p| ~ 1/240) feed dx = dlogits W, a sum that cancels almost to nothing, and the rounding
  // of each p survives the cancellation. The single layers (above) meet 5e-2 with a random upstream
  // gradient; here the tolerance only catches gross errors (a missing term, a wrong sign or scale).
  constexpr double kTolModelGrad = 0.35;
  golden::ErrorTable errors("qwen35_model on the GPU (bf16)");
  errors.add("loss", golden::rel_error({loss}, f.read<double>("loss")), kTolOut);
  golden::compare_grads(f, model.params(), errors, kTolModelGrad);
  errors.check();
  // Same inputs, same bits.
  EXPECT_EQ(model.forward(rt.ctx(), inputs.data(), targets.data()), loss);
}

// A small hybrid at shapes the GPU kernels take (head dims 64), trained on a learnable stream:
// each sequence counts up from a random start (mod vocab), so the loss falls fast.
ModelConfig small_hybrid() {
  ModelConfig c;
  c.vocab_size = 512;
  c.d_model = 128;
  c.d_ff = 256;
  c.layers = {MixerKind::kGdn, MixerKind::kGdn, MixerKind::kGdn, MixerKind::kAttn};
  c.tie_embeddings = false;
  c.attn.n_heads = 2;
  c.attn.n_kv_heads = 1;
  c.attn.head_dim = 64;
  c.attn.rotary_dim = 32;
  c.attn.qk_norm = true;
  c.attn.output_gate = true;
  c.gdn.n_k_heads = 1;
  c.gdn.n_v_heads = 2;
  c.gdn.head_k_dim = 64;
  c.gdn.head_v_dim = 64;
  c.gdn.conv_kernel = 4;
  c.gdn.chunk_size = 64;
  return c;
}

std::vector<double> train_losses(Device device, int steps, int B, int T) {
  Runtime rt(device);
  Model model(small_hybrid(), B, T, DType::kF32, device);
  model.init(7);
  AdamW opt(model.params(), {0.9, 0.95, 1e-8, 0.1});
  std::vector<int32_t> tokens(static_cast<size_t>(B) * (T + 1)), in(static_cast<size_t>(B) * T), tgt(in.size());
  std::vector<double> losses;
  for (int step = 0; step < steps; ++step) {
    for (int b = 0; b < B; ++b) {
      const int start = static_cast<int>(philox_uniform(99, step, b) * 512);
      for (int t = 0; t <= T; ++t) tokens[b * (T + 1) + t] = (start + t * 3) % 512;
      for (int t = 0; t < T; ++t) {
        in[b * T + t] = tokens[b * (T + 1) + t];
        tgt[b * T + t] = tokens[b * (T + 1) + t + 1];
      }
    }
    model.params().zero_grads();
    losses.push_back(model.forward(rt.ctx(), in.data(), tgt.data()));
    model.backward(rt.ctx(), 1.0);
    clip_grad_norm(rt.ctx(), model.params(), 1.0);
    opt.step(rt.ctx(), 3e-3);
  }
  return losses;
}

TEST(TrainCuda, TwentyStepsTrackTheCpuRun) {
  SKIP_WITHOUT_GPU();
  const int steps = 20, B = 4, T = 100;  // T: one full chunk and a partial one
  std::vector<double> cpu = train_losses(Device::kCPU, steps, B, T);
  std::vector<double> gpu = train_losses(Device::kCUDA, steps, B, T);
  ASSERT_EQ(cpu.size(), gpu.size());
  double worst = 0;
  for (int i = 0; i < steps; ++i) {
    const double rel = std::fabs(gpu[i] - cpu[i]) / std::fabs(cpu[i]);
    worst = std::max(worst, rel);
    std::printf("step %2d  cpu %.5f  gpu %.5f  rel %.2e\n", i + 1, cpu[i], gpu[i], rel);
    EXPECT_LE(rel, 0.02) << "step " << i + 1;
  }
  std::printf("worst relative difference %.3e (limit 2e-2)\n", worst);
  EXPECT_LT(cpu.back(), 0.8 * cpu.front()) << "the run must learn, or the comparison says little";
  // The same run again on the GPU: the same losses, bitwise.
  std::vector<double> again = train_losses(Device::kCUDA, steps, B, T);
  for (int i = 0; i < steps; ++i) EXPECT_EQ(again[i], gpu[i]) << "step " << i + 1;
}

}  // namespace
}  // namespace dt
