// validate_config: every rule between config values (ranges, divisibility, tensor-parallel
// sizes), each broken rule one line of a single error; validate_config_for_device: the GPU kernels'
// limits on the model, once the device is known.
#include "trainer/config_validate.h"

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "trainer/config.h"
#include "trainer/config_limits.h"

namespace dt {

namespace {

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

}  // namespace

void validate_config(const Config& c) {
  std::vector<std::string> errs;
  auto rule = [&](bool ok, std::string msg) {
    if (!ok) errs.push_back(std::move(msg));
  };
  auto positive = [&](const char* key, auto v) { rule(v > 0, fmt::format("{} = {} must be > 0", key, v)); };
  auto non_negative = [&](const char* key, auto v) { rule(v >= 0, fmt::format("{} = {} must be >= 0", key, v)); };
  auto divides = [&](const char* key_a, int a, const char* key_b, int b, const char* why) {
    if (a > 0 && b > 0)
      rule(a % b == 0, fmt::format("{} = {} must be divisible by {} = {} ({})", key_a, a, key_b, b, why));
  };
  const ModelConfig& m = c.model;
  positive("model.vocab_size", m.vocab_size);
  positive("model.d_model", m.d_model);
  positive("model.d_ff", m.d_ff);
  rule(!m.layers.empty(), "model.layers is empty: the pattern needs at least one layer, e.g. [gdn, gdn, gdn, attn]");
  positive("model.norm_eps", m.norm_eps);
  positive("model.init_std", m.init_std);

  positive("model.attn.n_heads", m.attn.n_heads);
  positive("model.attn.n_kv_heads", m.attn.n_kv_heads);
  positive("model.attn.head_dim", m.attn.head_dim);
  divides("model.attn.n_heads", m.attn.n_heads, "model.attn.n_kv_heads", m.attn.n_kv_heads,
          "each key/value head serves n_heads / n_kv_heads query heads");
  non_negative("model.attn.rotary_dim", m.attn.rotary_dim);
  rule(m.attn.rotary_dim % 2 == 0,
       fmt::format("model.attn.rotary_dim = {} must be even (RoPE rotates pairs of dims)", m.attn.rotary_dim));
  rule(m.attn.rotary_dim <= m.attn.head_dim,
       fmt::format("model.attn.rotary_dim = {} must be <= model.attn.head_dim = {}", m.attn.rotary_dim,
                   m.attn.head_dim));
  positive("model.attn.rope_theta", m.attn.rope_theta);

  positive("model.mla.n_heads", m.mla.n_heads);
  non_negative("model.mla.q_lora_rank", m.mla.q_lora_rank);
  positive("model.mla.kv_lora_rank", m.mla.kv_lora_rank);
  non_negative("model.mla.qk_nope_head_dim", m.mla.qk_nope_head_dim);
  positive("model.mla.qk_rope_head_dim", m.mla.qk_rope_head_dim);
  rule(m.mla.qk_rope_head_dim % 2 == 0,
       fmt::format("model.mla.qk_rope_head_dim = {} must be even (RoPE rotates pairs of dims)",
                   m.mla.qk_rope_head_dim));
  positive("model.mla.v_head_dim", m.mla.v_head_dim);
  positive("model.mla.rope_theta", m.mla.rope_theta);

  positive("model.gdn.n_k_heads", m.gdn.n_k_heads);
  positive("model.gdn.n_v_heads", m.gdn.n_v_heads);
  divides("model.gdn.n_v_heads", m.gdn.n_v_heads, "model.gdn.n_k_heads", m.gdn.n_k_heads,
          "value head j reads key head j / (n_v_heads / n_k_heads)");
  positive("model.gdn.head_k_dim", m.gdn.head_k_dim);
  positive("model.gdn.head_v_dim", m.gdn.head_v_dim);
  positive("model.gdn.conv_kernel", m.gdn.conv_kernel);
  non_negative("model.gdn.chunk_size", m.gdn.chunk_size);

  rule(!c.data.train.empty(), "data.train is empty: give a glob of train shards, e.g. shards/x/x_train_*.bin");
  rule(!c.data.val.empty() || c.train.eval_batches == 0,
       "data.val is empty: give a glob of validation shards, or set train.eval_batches: 0");

  const TrainConfig& t = c.train;
  positive("train.batch_size", t.batch_size);
  positive("train.seq_len", t.seq_len);
  positive("train.steps", t.steps);
  non_negative("train.lr", t.lr);
  non_negative("train.min_lr", t.min_lr);
  rule(t.min_lr <= t.lr, fmt::format("train.min_lr = {} must be <= train.lr = {}", t.min_lr, t.lr));
  non_negative("train.warmup_steps", t.warmup_steps);
  rule(t.warmup_steps <= t.steps, fmt::format("train.warmup_steps = {} must be <= train.steps = {}",
                                              t.warmup_steps, t.steps));
  non_negative("train.weight_decay", t.weight_decay);
  rule(t.beta1 >= 0 && t.beta1 < 1, fmt::format("train.beta1 = {} must be in [0, 1)", t.beta1));
  rule(t.beta2 >= 0 && t.beta2 < 1, fmt::format("train.beta2 = {} must be in [0, 1)", t.beta2));
  positive("train.eps", t.eps);
  non_negative("train.grad_clip", t.grad_clip);
  non_negative("train.eval_every", t.eval_every);
  non_negative("train.eval_batches", t.eval_batches);
  positive("train.grad_accum", t.grad_accum);
  positive("train.max_skips_in_a_row", t.max_skips_in_a_row);
  non_negative("train.checkpoint_every", t.checkpoint_every);
  non_negative("train.keep_last", t.keep_last);
  rule(t.checkpoint_every == 0 || t.keep_last >= 1,
       fmt::format("train.keep_last = {} must be >= 1 when train.checkpoint_every = {} > 0 (a checkpoint that is "
                   "deleted at once protects nothing)",
                   t.keep_last, t.checkpoint_every));

  rule(!c.run.dir.empty(), "run.dir is empty: give a folder for run directories, e.g. runs");
  rule(c.run.device == "auto" || c.run.device == "cpu" || c.run.device == "cuda",
       fmt::format("run.device = '{}' must be auto, cpu or cuda", c.run.device));
  non_negative("run.threads", c.run.threads);
  for (std::string& e : config_limit_errors(c)) errs.push_back(std::move(e));
  positive("run.log_every", c.run.log_every);

  // Data parallelism (parallel/dp_grads.h) and the collectives' timeout (parallel/communicator.h).
  positive("parallel.bucket_mb", c.parallel.bucket_mb);
  rule(c.parallel.timeout_s > 0,
       fmt::format("parallel.timeout_s = {} must be > 0: it is how long a collective waits for the other ranks "
                   "before the job is ended (the default 600 s suits most runs; raise it for slow first steps)",
                   c.parallel.timeout_s));

  // Tensor parallelism splits heads (and the vocabulary) across the TP ranks (docs/parallel.md, "Tensor
  // parallelism in the layers").
  int tp = c.parallel.tp;
  positive("parallel.tp", tp);
  if (tp > 1) {
    auto uses = [&](MixerKind k) { return std::find(m.layers.begin(), m.layers.end(), k) != m.layers.end(); };
    const char* why = "each tensor-parallel rank holds whole heads";
    divides("model.vocab_size", m.vocab_size, "parallel.tp", tp, "the embedding and LM head split the vocabulary");
    // The parallel.tp values (divisors of n) that `fits`, for the messages: "1, 2, 4".
    auto valid_tp = [](int n, auto fits) {
      std::vector<std::string> v;
      for (int t = 1; t <= n; ++t)
        if (n % t == 0 && fits(t)) v.push_back(std::to_string(t));
      return join(v, ", ");
    };
    if (uses(MixerKind::kAttn)) {
      const int H = m.attn.n_heads, Hkv = m.attn.n_kv_heads;
      divides("model.attn.n_heads", H, "parallel.tp", tp, why);
      // Each rank holds whole KV heads, or, with fewer KV heads than ranks, the one KV head its
      // query heads read, replicated on tp / n_kv_heads ranks (layers/attention.h).
      if (H > 0 && Hkv > 0 && H % Hkv == 0) {
        const std::string valid = fmt::format(
            "valid parallel.tp for model.attn.n_heads = {} and model.attn.n_kv_heads = {}: {}", H, Hkv,
            valid_tp(H, [&](int t) { return Hkv % t == 0 || t % Hkv == 0; }));
        if (Hkv >= tp)
          rule(Hkv % tp == 0, fmt::format("model.attn.n_kv_heads = {} must be divisible by parallel.tp = {} (each "
                                          "tensor-parallel rank holds whole key/value heads); {}",
                                          Hkv, tp, valid));
        else
          rule(tp % Hkv == 0, fmt::format("parallel.tp = {} must be divisible by model.attn.n_kv_heads = {} (fewer "
                                          "key/value heads than ranks are replicated evenly, each on parallel.tp / "
                                          "n_kv_heads ranks); {}",
                                          tp, Hkv, valid));
      }
    }
    // The SwiGLU hidden size splits too (gate_proj and up_proj by output, down_proj by input features).
    divides("model.d_ff", m.d_ff, "parallel.tp", tp, "the MLP splits its hidden features across the TP ranks");
    if (uses(MixerKind::kMla)) divides("model.mla.n_heads", m.mla.n_heads, "parallel.tp", tp, why);
    if (uses(MixerKind::kGdn)) {
      // GDN key heads are not replicated (unlike attention's KV heads): every rank holds whole key heads.
      const int Hk = m.gdn.n_k_heads, Hv = m.gdn.n_v_heads;
      const std::string valid =
          Hk > 0 && Hv > 0 && Hv % Hk == 0
              ? fmt::format("; valid parallel.tp for model.gdn.n_k_heads = {}: {}", Hk,
                            valid_tp(Hk, [](int) { return true; }))
              : std::string();
      if (Hk > 0) rule(Hk % tp == 0, fmt::format("model.gdn.n_k_heads = {} must be divisible by parallel.tp = {} ({}; "
                                                 "GDN key heads are not replicated across ranks){}",
                                                 Hk, tp, why, valid));
      divides("model.gdn.n_v_heads", Hv, "parallel.tp", tp, why);
    }
  }
  if (errs.size() == 1) DT_FAIL("invalid config: {}", errs[0]);
  if (!errs.empty()) DT_FAIL("invalid config:\n  - {}", join(errs, "\n  - "));
}

std::vector<std::string> device_limit_errors(const ModelConfig& m, Device device, bool training) {
  std::vector<std::string> errs;
  const bool gdn = std::find(m.layers.begin(), m.layers.end(), MixerKind::kGdn) != m.layers.end();
  if (device != Device::kCUDA || !gdn) return errs;
  const GdnConfig& g = m.gdn;
  if (g.chunk_size == 0 && training)
    errs.push_back(fmt::format("model.gdn.chunk_size: 0 (the token-by-token recurrence) has no GPU backward; use "
                               "chunk_size {} or --device cpu",
                               kGpuGdnMaxChunk));
  if (g.chunk_size > kGpuGdnMaxChunk)
    errs.push_back(fmt::format("model.gdn.chunk_size = {}: the GPU kernels take chunks of 1 to {} tokens ({} runs "
                               "the tensor-core kernels); use chunk_size {} or --device cpu",
                               g.chunk_size, kGpuGdnMaxChunk, kGpuGdnMaxChunk, kGpuGdnMaxChunk));
  auto head_dim = [&](const char* key, int d) {
    if (d % kGpuGdnHeadDimStep != 0 || d < kGpuGdnHeadDimStep || d > kGpuGdnMaxHeadDim)
      errs.push_back(fmt::format("{} = {}: the GPU kernels take head dims that are multiples of {} up to {} (the "
                                 "fastest, the tensor-core kernels: head_k_dim = head_v_dim = 64 or 128, "
                                 "chunk_size 64); use such a size or --device cpu",
                                 key, d, kGpuGdnHeadDimStep, kGpuGdnMaxHeadDim));
  };
  head_dim("model.gdn.head_k_dim", g.head_k_dim);
  head_dim("model.gdn.head_v_dim", g.head_v_dim);
  if (g.conv_kernel > kGpuGdnMaxConvKernel)
    errs.push_back(fmt::format("model.gdn.conv_kernel = {}: the GPU convolution takes widths of 1 to {}; use a "
                               "width up to {} or --device cpu",
                               g.conv_kernel, kGpuGdnMaxConvKernel, kGpuGdnMaxConvKernel));
  return errs;
}

void validate_config_for_device(const ModelConfig& m, Device device, bool training) {
  const std::vector<std::string> errs = device_limit_errors(m, device, training);
  if (errs.size() == 1) DT_FAIL("config not supported on the GPU: {}", errs[0]);
  if (!errs.empty()) DT_FAIL("config not supported on the GPU:\n  - {}", join(errs, "\n  - "));
}

}  // namespace dt
