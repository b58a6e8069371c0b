// The loss-comparison configs (configs/experiments/): four 124M models that differ only in their
// model and run name, within 1% of each other in parameters, in shapes the GPU kernels take; and
// the counts and decode memory `deltatron info` reports (layers/param_count.h, layers/decode_memory.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "layers/decode_memory.h"
#include "layers/model.h"
#include "layers/param_count.h"
#include "trainer/config.h"

namespace dt {
namespace {

const std::string kSourceDir = DELTATRON_SOURCE_DIR;
const std::vector<std::string> kExperiments = {"softmax_124m", "gdn_124m", "hybrid_gqa_124m", "hybrid_mla_124m"};

Config experiment(const std::string& name) {
  return load_config(kSourceDir + "/configs/experiments/" + name + ".yaml");
}

TEST(Experiments, ParameterCountsWithinOnePercent) {
  int64_t lo = 0, hi = 0;
  for (const std::string& name : kExperiments) {
    const ParamCount n = count_params(experiment(name).model);
    int64_t parts = 0;
    for (const auto& [part, count] : n.by_part) parts += count;
    EXPECT_EQ(parts, n.total) << name;
    lo = lo == 0 ? n.total : std::min(lo, n.total);
    hi = std::max(hi, n.total);
  }
  EXPECT_LE(static_cast<double>(hi) / static_cast<double>(lo) - 1.0, 0.01) << "min " << lo << ", max " << hi;
}

TEST(Experiments, OnlyModelAndRunNameDiffer) {
  const Config first = experiment(kExperiments[0]);
  const auto reference = config_values(first);
  for (const std::string& name : kExperiments) {
    const Config c = experiment(name);
    EXPECT_EQ(c.run.name, name);
    const auto values = config_values(c);
    ASSERT_EQ(values.size(), reference.size());
    for (size_t i = 0; i < values.size(); ++i) {
      const std::string& key = values[i].first;
      if (key.rfind("model.", 0) == 0 || key == "run.name") continue;
      EXPECT_EQ(values[i].second, reference[i].second) << name << ": " << key;
    }
  }
  // The shared recipe: 8 x 2 x 1024 = 16384 tokens a step, 100M tokens.
  EXPECT_EQ(first.train.batch_size * first.train.grad_accum * first.train.seq_len, 16384);
  EXPECT_EQ(first.train.steps, 6104);
  EXPECT_EQ(first.train.seed, 1u);
  EXPECT_EQ(first.train.checkpoint_every, 500);
  EXPECT_EQ(first.data.train, "shards/comparison/corpus_train_*.bin");
  EXPECT_EQ(first.data.val, "shards/comparison/fineweb_edu_val_*.bin");
}

TEST(Experiments, LayerPatternsAndShape) {
  const MixerKind G = MixerKind::kGdn, A = MixerKind::kAttn, M = MixerKind::kMla;
  EXPECT_EQ(experiment("softmax_124m").model.layers, std::vector<MixerKind>(12, A));
  EXPECT_EQ(experiment("gdn_124m").model.layers, std::vector<MixerKind>(12, G));
  EXPECT_EQ(experiment("hybrid_gqa_124m").model.layers, parse_layer_pattern("[gdn, gdn, gdn, attn] * 3"));
  EXPECT_EQ(experiment("hybrid_mla_124m").model.layers,
            std::vector<MixerKind>({M, G, G, G, M, G, G, G, M, G, G, M}));
  for (const std::string& name : kExperiments) {
    const ModelConfig m = experiment(name).model;
    EXPECT_EQ(m.d_model, 768) << name;
    EXPECT_EQ(m.vocab_size, 50304) << name;
    EXPECT_TRUE(m.tie_embeddings) << name;
    // What the GPU kernels take: GDN head dims 64 or 128 with chunks of 64; cuDNN attention head
    // dims multiples of 8 up to 256; MLA with one KV head per query head and an even rope dim.
    const bool has_gdn = std::count(m.layers.begin(), m.layers.end(), MixerKind::kGdn) > 0;
    if (has_gdn) {
      for (int d : {m.gdn.head_k_dim, m.gdn.head_v_dim}) EXPECT_TRUE(d == 64 || d == 128) << name;
      EXPECT_EQ(m.gdn.chunk_size, 64) << name;
    }
    auto cudnn_dim = [](int d) { return d > 0 && d % 8 == 0 && d <= 256; };
    EXPECT_TRUE(cudnn_dim(m.attn.head_dim)) << name;
    EXPECT_TRUE(cudnn_dim(m.mla.qk_nope_head_dim + m.mla.qk_rope_head_dim)) << name;
    EXPECT_TRUE(cudnn_dim(m.mla.v_head_dim)) << name;
    EXPECT_EQ(m.mla.qk_rope_head_dim % 2, 0) << name;
  }
}

// The shape-only table is the allocated model's, name for name and shape for shape.
TEST(ParamCount, MatchesTheModel) {
  for (const char* pattern : {"[gdn, gdn, gdn, attn]", "[mla, gdn, attn]"}) {
    Config c = load_config(kSourceDir + "/configs/quickstart.yaml");
    c.model.layers = parse_layer_pattern(pattern);
    c.model.mla.q_lora_rank = 16;
    const Model model(c.model, 1, 2);
    const std::vector<ParamInfo> infos = Model::param_infos(c.model);
    ASSERT_EQ(infos.size(), model.params().infos().size()) << pattern;
    for (size_t i = 0; i < infos.size(); ++i) {
      EXPECT_EQ(infos[i].name, model.params().infos()[i].name);
      EXPECT_EQ(infos[i].full_shape, model.params().infos()[i].full_shape) << infos[i].name;
    }
    EXPECT_EQ(count_params(c.model).total, model.params().numel()) << pattern;
  }
}

// configs/quickstart.yaml by hand: d_model 64, d_ff 192, vocab 50304 untied, [gdn, gdn, gdn, attn],
// attn 2 heads (1 KV) of 32 with qk_norm and the output gate, gdn 1 key head and 2 value heads of 32.
TEST(ParamCount, QuickstartByHand) {
  const ModelConfig m = load_config(kSourceDir + "/configs/quickstart.yaml").model;
  const int64_t embed = 50304 * 64;
  const int64_t gdn = 128 * 64 + 64 * 64 + 2 * 64 + 2 * 64 + 128 * 4 + 2 + 2 + 32 + 64 * 64;  // qkv z b a conv A dt norm out
  const int64_t attn = 128 * 64 + 32 * 64 + 32 * 64 + 64 * 64 + 32 + 32;  // q(+gate) k v o q_norm k_norm
  const int64_t mlp = 3 * 64 * 192, layer_norms = 2 * 64;
  const std::map<std::string, int64_t> want = {{"embedding", embed}, {"gdn", 3 * gdn},  {"attn", attn}, {"mla", 0},
                                               {"mlp", 4 * mlp},     {"norms", 4 * layer_norms + 64}, {"head", embed}};
  const ParamCount n = count_params(m);
  int64_t total = 0;
  for (const auto& [part, count] : n.by_part) {
    EXPECT_EQ(count, want.at(part)) << part;
    total += want.at(part);
  }
  EXPECT_EQ(n.total, total);
}

// The same, decode memory: 3 GDN layers of 2 fp32 32x32 states and a 3-token bf16 conv tail of
// 2*32 + 2*32 channels; 1 attention layer caching a key and a value of 32 (one KV head) per token.
TEST(DecodeMemory, QuickstartByHand) {
  const DecodeMemory d = decode_memory(load_config(kSourceDir + "/configs/quickstart.yaml").model);
  const int64_t gdn_layer = 2 * 32 * 32 * 4 + 3 * (2 * 32 + 2 * 32) * 2;
  EXPECT_EQ(d.state_bytes_per_sequence, 3 * gdn_layer);
  EXPECT_EQ(d.cache_bytes_per_token, 2 * 32 * 2);
  EXPECT_EQ(d.bytes_per_sequence(32768), 3 * gdn_layer + 32768 * 128);
  ASSERT_EQ(d.parts.size(), 2u);
  EXPECT_EQ(d.parts[0].kind, MixerKind::kGdn);
  EXPECT_EQ(d.parts[0].n_layers, 3);
  EXPECT_EQ(d.parts[1].kind, MixerKind::kAttn);
}

TEST(DecodeMemory, MlaCachesTheLatent) {
  ModelConfig m = experiment("hybrid_mla_124m").model;
  const DecodeMemory d = decode_memory(m);
  EXPECT_EQ(d.cache_bytes_per_token, 4 * (m.mla.kv_lora_rank + m.mla.qk_rope_head_dim) * 2);
  EXPECT_EQ(d.state_bytes_per_sequence, 8 * (12 * 64 * 64 * 4 + 3 * (3 * 768) * 2));
  const DecodeMemory s = decode_memory(experiment("softmax_124m").model);
  EXPECT_EQ(s.state_bytes_per_sequence, 0);
  EXPECT_EQ(s.cache_bytes_per_token, 12 * 2 * 768 * 2);  // 2·L·d bf16
}

// The fp8 latent cache (generate --mla-cache fp8): per MLA layer and token 512 e4m3 bytes, 4 fp32
// scales and 64 bf16 rope values, 656 bytes; the target for the decode memory: at 32K the hybrid's is
// at most 8% of the softmax baseline's (7.26%; 12.64% with the bf16 latent).
TEST(DecodeMemory, MlaFp8CacheMeetsTheTarget) {
  const ModelConfig m = experiment("hybrid_mla_124m").model;
  const DecodeMemory d16 = decode_memory(m), d8 = decode_memory(m, MlaCache::kFp8);
  EXPECT_EQ(d8.cache_bytes_per_token, 4 * (512 + 4 * 4 + 64 * 2));
  EXPECT_EQ(d8.state_bytes_per_sequence, d16.state_bytes_per_sequence);
  const DecodeMemory s = decode_memory(experiment("softmax_124m").model);
  const double soft = static_cast<double>(s.bytes_per_sequence(32768));
  EXPECT_LE(static_cast<double>(d8.bytes_per_sequence(32768)) / soft, 0.08);
  EXPECT_GT(static_cast<double>(d16.bytes_per_sequence(32768)) / soft, 0.08);  // what the fp8 cache is for
  ModelConfig odd = m;
  odd.mla.kv_lora_rank = 500;
  EXPECT_THROW(decode_memory(odd, MlaCache::kFp8), Error);
}

}  // namespace
}  // namespace dt
