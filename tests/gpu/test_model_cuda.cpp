// The model on the GPU (bf16 mixed precision) against the CPU: the golden Hugging Face files
// within bf16 tolerance, and a 20-step training run whose losses track the CPU fp32 run's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/philox.h"
#include "layers/attention.h"
#include "layers/gdn.h"
#include "layers/mla.h"
#include "hf/qwen35.h"
#include "layers/model.h"
#include "tests/trainer/golden_deepseek_v3.h"
#include "tests/trainer/golden_io.h"
#include "trainer/adamw.h"
#include "tests/gpu/gpu_testing.h"
#include "trainer/runtime.h"

namespace dt {
namespace {

// bf16 keeps 8 significant bits (unit roundoff 2^-9 = 2e-3 per rounding); activations are rounded
// at every op boundary of a forward (about 10 of them per layer), gradients again in the backward.
// Measured errors are printed by ErrorTable; the CPU fp32 path meets 1e-5 / 1e-4 on the same files.
constexpr double kTolOut = 2e-2;
constexpr double kTolGrad = 5e-2;

TEST(GoldenCuda, GatedAttentionLayer) {
  SKIP_WITHOUT_GPU();
  Runtime rt(Device::kCUDA);
  golden::check_layer<Attention>("qwen35_attn_layer.h5", "qwen35 Attention on the GPU (bf16)",
                                 model_config_from_qwen35, [](ModelConfig&) {}, kTolOut, kTolGrad, &rt.ctx());
}

TEST(GoldenCuda, GatedDeltaNetLayer) {
  SKIP_WITHOUT_GPU();
  Runtime rt(Device::kCUDA);
  golden::check_layer<GatedDeltaNet>("qwen35_gdn_layer.h5", "qwen35 GatedDeltaNet on the GPU (bf16, chunk 64)",
                                     model_config_from_qwen35, [](ModelConfig& c) { c.gdn.chunk_size = 64; },
                                     kTolOut, kTolGrad, &rt.ctx());
}

// DeepseekV3Attention (4 heads, q_lora_rank 24, kv_lora_rank 32, nope 16 + rope 8 interleaved, v 16)
// on the GPU: the output and every gradient within the bf16 tolerances of the layers above.
TEST(GoldenCuda, MlaLayer) {
  SKIP_WITHOUT_GPU();
  Runtime rt(Device::kCUDA);
  golden::check_layer<MLA>("deepseek_v3_mla.h5", "deepseek_v3 MLA on the GPU (bf16)", golden::model_config_from_deepseek_v3,
                           [](ModelConfig&) {}, kTolOut, kTolGrad, &rt.ctx());
}

// The same layer with rotate-half RoPE in place of the interleaved pairs: HF's file is interleaved,
// so here the GPU is checked against our own CPU fp32 layer on the same weights and inputs.
TEST(GoldenCuda, MlaLayerMatchesTheCpuInBothRopeModes) {
  SKIP_WITHOUT_GPU();
  Runtime rt(Device::kCUDA);
  for (bool interleave : {true, false}) {
    SCOPED_TRACE(interleave ? "interleaved rope" : "rotate-half rope");
    golden::check_layer_against_cpu<MLA>("deepseek_v3_mla.h5", golden::model_config_from_deepseek_v3,
                                         [interleave](ModelConfig& c) { c.mla.rope_interleave = interleave; },
                                         kTolOut, kTolGrad, rt.ctx());
  }
}

TEST(GoldenCuda, WholeModel) {
  SKIP_WITHOUT_GPU();
  golden::GoldenFile f(golden::golden_path("qwen35_model.h5"));
  ModelConfig cfg = model_config_from_qwen35(nlohmann::json::parse(f.attr_string("config_json")));
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

struct TrainTrack {
  std::vector<double> loss, grad_norm;  // per step; grad_norm before clipping
};

TrainTrack train_track(const ModelConfig& cfg, Device device, int steps, int B, int T) {
  Runtime rt(device);
  Model model(cfg, B, T, DType::kF32, device);
  model.init(7);
  AdamW opt(model.params(), {0.9, 0.95, 1e-8, 0.1});
  std::vector<int32_t> tokens(static_cast<size_t>(B) * (T + 1)), in(static_cast<size_t>(B) * T), tgt(in.size());
  TrainTrack track;
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
    track.loss.push_back(model.forward(rt.ctx(), in.data(), tgt.data()));
    model.backward(rt.ctx(), 1.0);
    track.grad_norm.push_back(clip_grad_norm(rt.ctx(), model.params(), 1.0));
    opt.step(rt.ctx(), 3e-3);
  }
  return track;
}

// The GPU run against the CPU fp32 run from the same seed: every step's loss within 2% and, where
// `grad_tol` > 0, its gradient norm within grad_tol (the norm shows a wrong gradient long before
// the loss does). The run must learn, and the GPU run repeats itself bitwise.
void expect_gpu_tracks_cpu(const ModelConfig& cfg, int steps, int B, int T, double grad_tol) {
  const TrainTrack cpu = train_track(cfg, Device::kCPU, steps, B, T);
  const TrainTrack gpu = train_track(cfg, Device::kCUDA, steps, B, T);
  double worst = 0, worst_norm = 0;
  for (int i = 0; i < steps; ++i) {
    const double rel = std::fabs(gpu.loss[i] - cpu.loss[i]) / std::fabs(cpu.loss[i]);
    const double rel_norm = std::fabs(gpu.grad_norm[i] - cpu.grad_norm[i]) / cpu.grad_norm[i];
    worst = std::max(worst, rel);
    worst_norm = std::max(worst_norm, rel_norm);
    std::printf("step %2d  loss cpu %.5f gpu %.5f (rel %.2e)  grad norm cpu %.4f gpu %.4f (rel %.2e)\n", i + 1,
                cpu.loss[i], gpu.loss[i], rel, cpu.grad_norm[i], gpu.grad_norm[i], rel_norm);
    EXPECT_LE(rel, 0.02) << "loss, step " << i + 1;
    if (grad_tol > 0) {
      EXPECT_LE(rel_norm, grad_tol) << "gradient norm, step " << i + 1;
    }
  }
  std::printf("worst relative difference: loss %.3e (limit 2e-2), gradient norm %.3e\n", worst, worst_norm);
  EXPECT_LT(cpu.loss.back(), 0.8 * cpu.loss.front()) << "the run must learn, or the comparison says little";
  const TrainTrack again = train_track(cfg, Device::kCUDA, steps, B, T);
  for (int i = 0; i < steps; ++i) EXPECT_EQ(again.loss[i], gpu.loss[i]) << "step " << i + 1;
}

TEST(TrainCuda, TwentyStepsTrackTheCpuRun) {
  SKIP_WITHOUT_GPU();
  expect_gpu_tracks_cpu(small_hybrid(), 20, 4, 100, /*grad_tol=*/0.1);  // T: one full chunk and a partial one
}

// MLA layers (first and last, GDN between) with both RoPE forms, and with a low-rank query.
ModelConfig small_mla_hybrid(bool interleave, int q_lora_rank) {
  ModelConfig c = small_hybrid();
  c.layers = {MixerKind::kMla, MixerKind::kGdn, MixerKind::kGdn, MixerKind::kMla};
  c.mla.n_heads = 2;
  c.mla.kv_lora_rank = 32;
  c.mla.q_lora_rank = q_lora_rank;
  c.mla.qk_nope_head_dim = 16;
  c.mla.qk_rope_head_dim = 16;
  c.mla.v_head_dim = 32;
  c.mla.rope_interleave = interleave;
  return c;
}

// One step of the MLA hybrid from the same initial weights and batch: every parameter's gradient on
// the GPU against the CPU's. The loss of this random model is near uniform, so bf16 leaves the
// gradients a few % apart (see WholeModel); a missing or doubled term shows as tens of %.
TEST(ModelCuda, MlaHybridGradientsMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  const int B = 4, T = 100;
  std::vector<int32_t> in(static_cast<size_t>(B) * T), tgt(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    in[i] = static_cast<int32_t>((i * 7) % 512);
    tgt[i] = static_cast<int32_t>((i * 7 + 3) % 512);
  }
  for (bool interleave : {true, false}) {
    const ModelConfig cfg = small_mla_hybrid(interleave, 0);
    Runtime cpu_rt(Device::kCPU), gpu_rt(Device::kCUDA);
    Model cpu(cfg, B, T, DType::kF32, Device::kCPU), gpu(cfg, B, T, DType::kF32, Device::kCUDA);
    cpu.init(7);
    gpu.init(7);
    cpu.params().zero_grads();
    gpu.params().zero_grads();
    const double lc = cpu.forward(cpu_rt.ctx(), in.data(), tgt.data());
    const double lg = gpu.forward(gpu_rt.ctx(), in.data(), tgt.data());
    cpu.backward(cpu_rt.ctx(), 1.0);
    gpu.backward(gpu_rt.ctx(), 1.0);
    golden::ErrorTable errors(std::string("MLA hybrid gradients, GPU against CPU, ") +
                              (interleave ? "interleaved rope" : "rotate-half rope"));
    errors.add("loss", std::fabs(lg - lc) / lc, 1e-2);
    for (const ParamInfo& p : cpu.params().infos())
      errors.add("grad " + p.name,
                 golden::rel_error(golden::to_host_f64(gpu.params().grad(p.name)),
                                   golden::to_host_f64(cpu.params().grad(p.name))),
                 0.1);
    errors.check();
  }
}

TEST(TrainCuda, MlaModelTracksTheCpuRunInBothRopeModes) {
  SKIP_WITHOUT_GPU();
  for (bool interleave : {true, false})
    for (int q_lora_rank : {0, 16}) {
      SCOPED_TRACE(std::string(interleave ? "interleaved" : "rotate-half") + " rope, q_lora_rank " +
                   std::to_string(q_lora_rank));
      expect_gpu_tracks_cpu(small_mla_hybrid(interleave, q_lora_rank), 40, 4, 100, /*grad_tol=*/0.1);
    }
}

}  // namespace
}  // namespace dt
