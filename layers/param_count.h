// The trainable parameter count of a model config, whole and by part, from the parameters the
// model itself declares (Model::param_infos): nothing is allocated, so a 124M config counts in
// microseconds and the count cannot drift from the model.
//
//   ParamCount n = count_params(cfg);
//   n.total                  // every element of every parameter (a tied LM head counted once)
//   n.by_part[0].first       // "embedding", then "gdn", "attn", "mla", "mlp", "norms", "head"
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "layers/model_config.h"
#include "layers/params.h"

namespace dt {

struct ParamCount {
  int64_t total = 0;
  // Always these seven parts, in this order, summing to total (a part the model lacks is 0):
  //   embedding  model.embed_tokens.weight
  //   gdn, attn, mla  the mixers of the layers of that kind, their own norms included
  //   mlp        every layer's SwiGLU MLP
  //   norms      every layer's input_layernorm and post_attention_layernorm, and model.norm
  //   head       lm_head.weight (0 when tied to the embedding)
  std::vector<std::pair<std::string, int64_t>> by_part;
};

// The count of the parameters `infos` of a model of `cfg` (Model::param_infos(cfg), or a model's
// params().infos() without tensor parallelism); a parameter of no known part is an error.
ParamCount count_params(const ModelConfig& cfg, const std::vector<ParamInfo>& infos);
// count_params(cfg, Model::param_infos(cfg)): throws dt::Error when cfg cannot make a model.
ParamCount count_params(const ModelConfig& cfg);

}  // namespace dt
