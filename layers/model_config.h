// The model's shape: what the YAML `model:` section resolves to (trainer/config.h).
// The layer pattern is data (docs/architecture.md, "Conventions"): one mixer kind per layer.
#pragma once

#include <string>
#include <vector>

namespace dt {

enum class MixerKind { kGdn, kAttn, kMla };

// The config's name of a mixer: "gdn", "attn", "mla".
inline const char* mixer_name(MixerKind k) {
  switch (k) {
    case MixerKind::kGdn: return "gdn";
    case MixerKind::kAttn: return "attn";
    case MixerKind::kMla: return "mla";
  }
  return "?";
}

// Softmax GQA attention, `self_attn` (Qwen3.5 full_attention when output_gate and qk_norm).
struct AttnConfig {
  int n_heads = 12;
  int n_kv_heads = 12;     // divides n_heads
  int head_dim = 64;
  int rotary_dim = 64;     // RoPE on the first rotary_dim dims of each head (even, <= head_dim)
  double rope_theta = 10000.0;
  bool qk_norm = false;    // per-head RMSNorm on q and k (zero-centred when the model's norms are)
  bool output_gate = false;  // q_proj emits [q_h | gate_h] per head; o *= sigmoid(gate)
};

// DeepSeek-V2/V3 multi-head latent attention, `self_attn`.
struct MlaConfig {
  int n_heads = 12;
  int q_lora_rank = 0;      // 0: direct q_proj
  int kv_lora_rank = 256;
  int qk_nope_head_dim = 64;
  int qk_rope_head_dim = 32;
  int v_head_dim = 64;
  double rope_theta = 10000.0;
  bool rope_interleave = true;  // RoPE on adjacent pairs of the rope dims (DeepSeek-V3's HF default)
};

// Gated DeltaNet, `linear_attn` (the Qwen3.5 form, docs/model.md, "Gated DeltaNet").
struct GdnConfig {
  int n_k_heads = 12;   // Hk
  int n_v_heads = 12;   // Hv, a multiple of Hk
  int head_k_dim = 64;  // dk
  int head_v_dim = 64;  // dv
  int conv_kernel = 4;
  int chunk_size = 64;  // 0: the token-by-token recurrence (reference)
};

struct ModelConfig {
  int vocab_size = 50304;
  int d_model = 768;
  int d_ff = 2048;             // SwiGLU hidden size
  std::vector<MixerKind> layers;  // one entry per layer
  bool tie_embeddings = true;  // lm_head shares model.embed_tokens.weight
  bool zero_centered_norm = true;  // RMSNorm * (1 + w), w init 0 (Qwen3.5)
  double norm_eps = 1e-6;
  double init_std = 0.02;
  AttnConfig attn;
  MlaConfig mla;
  GdnConfig gdn;

  int n_layers() const { return static_cast<int>(layers.size()); }
};

}  // namespace dt
