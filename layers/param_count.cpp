#include "layers/param_count.h"

#include <charconv>
#include <string_view>

#include "core/error.h"
#include "layers/embedding.h"
#include "layers/lm_head.h"
#include "layers/model.h"

namespace dt {

namespace {

// The part a parameter belongs to, from its Hugging Face name.
std::string part_of(const ModelConfig& cfg, std::string_view name) {
  if (name == Embedding::kWeightName) return "embedding";
  if (name == LMHead::kWeightName) return "head";
  if (name == "model.norm.weight") return "norms";
  constexpr std::string_view kLayers = "model.layers.";
  if (name.substr(0, kLayers.size()) == kLayers) {
    std::string_view rest = name.substr(kLayers.size());
    int index = -1;
    auto [p, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), index);
    if (ec == std::errc() && index >= 0 && index < cfg.n_layers() && p < rest.data() + rest.size() && *p == '.') {
      std::string_view sub = rest.substr(static_cast<size_t>(p - rest.data()) + 1);
      auto starts = [&](std::string_view prefix) { return sub.substr(0, prefix.size()) == prefix; };
      if (starts("self_attn.") || starts("linear_attn.")) return mixer_name(cfg.layers[index]);
      if (starts("mlp.")) return "mlp";
      if (starts("input_layernorm.") || starts("post_attention_layernorm.")) return "norms";
    }
  }
  DT_FAIL("count_params: parameter '{}' belongs to no known part of the model (embedding, a layer's mixer, mlp "
          "or norms, model.norm, lm_head)",
          name);
}

}  // namespace

ParamCount count_params(const ModelConfig& cfg, const std::vector<ParamInfo>& infos) {
  ParamCount n;
  for (const char* part : {"embedding", "gdn", "attn", "mla", "mlp", "norms", "head"}) n.by_part.emplace_back(part, 0);
  for (const ParamInfo& p : infos) {
    const std::string part = part_of(cfg, p.name);
    const int64_t numel = p.full_shape.numel();
    for (auto& [name, count] : n.by_part)
      if (name == part) count += numel;
    n.total += numel;
  }
  return n;
}

ParamCount count_params(const ModelConfig& cfg) { return count_params(cfg, Model::param_infos(cfg)); }

}  // namespace dt
