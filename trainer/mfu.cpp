#include "trainer/mfu.h"

namespace dt {

double model_flops_per_token(const Model& model, int tp) {
  const ModelConfig& c = model.config();
  double matmul_params = 0;
  for (const ParamInfo& p : model.params().infos())
    if (p.shape.ndim == 2 && p.name != "model.embed_tokens.weight") matmul_params += static_cast<double>(p.shape.numel());
  if (c.tie_embeddings) matmul_params += static_cast<double>(c.vocab_size) * c.d_model / tp;  // the LM head's matmul
  double attn = 0;
  for (MixerKind k : c.layers) {
    if (k == MixerKind::kAttn) attn += 6.0 * model.seq_len() * c.attn.n_heads * c.attn.head_dim / tp;
    if (k == MixerKind::kMla)
      attn += 3.0 * model.seq_len() * c.mla.n_heads *
              (c.mla.qk_nope_head_dim + c.mla.qk_rope_head_dim + c.mla.v_head_dim) / tp;
  }
  return 6.0 * matmul_params + attn;
}

double mfu(double tokens_per_s, double flops_per_token, double peak_tflops) {
  return tokens_per_s * flops_per_token / (peak_tflops * 1e12);
}

}  // namespace dt
