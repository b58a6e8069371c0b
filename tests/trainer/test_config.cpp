// The YAML config: defaults, layer patterns, --set, the round trip through config.yaml,
// and every kind of bad input (each must be an error naming the key, the value and the rule).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

#include "core/error.h"
#include "trainer/config.h"

namespace dt {
namespace {

using MK = MixerKind;

// Expects parse_config to throw a dt::Error whose message contains every piece.
void expect_error(const std::string& yaml, const std::vector<std::string>& sets,
                  std::initializer_list<std::string> pieces) {
  try {
    parse_config(yaml, sets, "test.yaml");
  } catch (const Error& e) {
    std::string msg = e.what();
    for (const std::string& p : pieces) EXPECT_NE(msg.find(p), std::string::npos) << "missing '" << p << "' in: " << msg;
    return;
  }
  ADD_FAILURE() << "no error for:\n" << yaml;
}

void expect_error(const std::string& yaml, std::initializer_list<std::string> pieces) {
  expect_error(yaml, {}, pieces);
}

TEST(Config, DefaultsAreTheHybrid124m) {
  Config c = default_config();
  EXPECT_NO_THROW(validate_config(c));
  ASSERT_EQ(c.model.n_layers(), 12);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(c.model.layers[i], i % 4 == 3 ? MK::kAttn : MK::kGdn) << i;
  EXPECT_EQ(c.model.d_model, 768);
  EXPECT_EQ(c.model.vocab_size, 50304);
  EXPECT_EQ(c.train.batch_size, 16);
  EXPECT_EQ(c.train.seq_len, 1024);
  EXPECT_EQ(c.parallel.tp, 1);
  // An empty file and an empty mapping are the defaults.
  EXPECT_TRUE(config_equal(parse_config(""), c));
  EXPECT_TRUE(config_equal(parse_config("{}"), c));
  EXPECT_TRUE(config_equal(parse_config("model:\ntrain:\n"), c));
}

TEST(Config, KeysAreUniqueAndDotted) {
  std::vector<std::string> keys = config_keys();
  EXPECT_GT(keys.size(), 40u);
  std::set<std::string> unique(keys.begin(), keys.end());
  EXPECT_EQ(unique.size(), keys.size());
  for (const std::string& k : keys) EXPECT_NE(k.find('.'), std::string::npos) << k;
}

TEST(Config, ReadsValuesOfEveryType) {
  Config c = parse_config(R"(
model:
  d_model: 256
  norm_eps: 1.0e-5
  tie_embeddings: false
  attn: {n_heads: 8, n_kv_heads: 2, head_dim: 32, rotary_dim: 16, qk_norm: true}
data:
  train: "data/*_train_*.bin"
train:
  lr: 3e-4
  seed: 18446744073709551615
run:
  device: cpu
)");
  EXPECT_EQ(c.model.d_model, 256);
  EXPECT_EQ(c.model.norm_eps, 1.0e-5);
  EXPECT_FALSE(c.model.tie_embeddings);
  EXPECT_EQ(c.model.attn.n_heads, 8);
  EXPECT_EQ(c.model.attn.n_kv_heads, 2);
  EXPECT_EQ(c.model.attn.rotary_dim, 16);
  EXPECT_TRUE(c.model.attn.qk_norm);
  EXPECT_EQ(c.data.train, "data/*_train_*.bin");
  EXPECT_EQ(c.train.lr, 3e-4);
  EXPECT_EQ(c.train.seed, 18446744073709551615ull);
  EXPECT_EQ(c.run.device, "cpu");
  EXPECT_EQ(c.train.steps, default_config().train.steps);  // untouched keys keep their defaults
}

TEST(Config, LayerListsAndRepeats) {
  EXPECT_EQ(parse_config("model:\n  layers: [gdn, gdn, attn, mla]\n").model.layers,
            (std::vector<MK>{MK::kGdn, MK::kGdn, MK::kAttn, MK::kMla}));
  EXPECT_EQ(parse_config("model:\n  layers:\n    - mla\n    - gdn\n").model.layers,
            (std::vector<MK>{MK::kMla, MK::kGdn}));
  std::vector<MK> r = parse_config("model:\n  layers: \"[gdn, gdn, gdn, attn] * 3\"\n").model.layers;
  ASSERT_EQ(r.size(), 12u);
  EXPECT_EQ(r[3], MK::kAttn);
  EXPECT_EQ(r[10], MK::kGdn);
  EXPECT_EQ(r[11], MK::kAttn);
  EXPECT_EQ(parse_layer_pattern("[mla] + [gdn,gdn]*2 + attn"),
            (std::vector<MK>{MK::kMla, MK::kGdn, MK::kGdn, MK::kGdn, MK::kGdn, MK::kAttn}));
  EXPECT_EQ(parse_layer_pattern("gdn * 3"), (std::vector<MK>{MK::kGdn, MK::kGdn, MK::kGdn}));
  EXPECT_EQ(parse_layer_pattern(" [ attn ] "), (std::vector<MK>{MK::kAttn}));
  EXPECT_TRUE(parse_layer_pattern("[]").empty());
}

TEST(Config, LayerPatternToString) {
  EXPECT_EQ(layer_pattern_to_string(parse_layer_pattern("[gdn, gdn, gdn, attn] * 3")), "[gdn, gdn, gdn, attn] * 3");
  EXPECT_EQ(layer_pattern_to_string(parse_layer_pattern("[gdn, attn] * 2 + [gdn, attn]")), "[gdn, attn] * 3");
  EXPECT_EQ(layer_pattern_to_string(parse_layer_pattern("gdn * 5")), "[gdn] * 5");
  EXPECT_EQ(layer_pattern_to_string(parse_layer_pattern("[gdn, attn, gdn]")), "[gdn, attn, gdn]");
  EXPECT_EQ(layer_pattern_to_string({}), "[]");
}

TEST(Config, RoundTripThroughYaml) {
  Config c = default_config();
  c.model.layers = parse_layer_pattern("[mla, gdn, gdn, mla, gdn, attn]");  // no repeat: written as a list
  c.model.norm_eps = 1e-6;

  c.train.min_lr = 1.0 / 3.0;
  c.train.lr = 0.5;
  c.train.seed = 0xfedcba9876543210ull;
  c.data.train = "*weird: path # with [yaml] chars'\"";
  c.run.name = "";
  c.model.attn.qk_norm = true;
  c.model.mla.rope_interleave = false;
  std::string yaml = config_to_yaml(c);
  Config back = parse_config(yaml);
  EXPECT_TRUE(config_equal(back, c)) << yaml;
  EXPECT_EQ(config_to_yaml(back), yaml);
  // A repeating pattern is written in the repeat form and reads back too.
  Config d = default_config();
  std::string dy = config_to_yaml(d);
  EXPECT_NE(dy.find("[gdn, gdn, gdn, attn] * 3"), std::string::npos) << dy;
  EXPECT_TRUE(config_equal(parse_config(dy), d));
  // And a field that differs is seen.
  Config e = d;
  e.train.lr = std::nextafter(e.train.lr, 1.0);
  EXPECT_FALSE(config_equal(e, d));
}

TEST(Config, SetOverridesAfterTheFile) {
  Config c = parse_config("train:\n  lr: 1e-3\n  steps: 50\n  warmup_steps: 5\n",
                          {"train.lr=2e-3", "model.layers=[attn, gdn]", "model.attn.qk_norm=true",
                           "model.gdn.n_v_heads=24", "run.name=abc", "data.val=x/*.bin",
                           "model.layers=\"[gdn, attn] * 2\""});
  EXPECT_EQ(c.train.lr, 2e-3);
  EXPECT_EQ(c.train.steps, 50);
  EXPECT_EQ(c.model.layers, (std::vector<MK>{MK::kGdn, MK::kAttn, MK::kGdn, MK::kAttn}));  // the last wins
  EXPECT_TRUE(c.model.attn.qk_norm);
  EXPECT_EQ(c.model.gdn.n_v_heads, 24);
  EXPECT_EQ(c.run.name, "abc");
  EXPECT_EQ(c.data.val, "x/*.bin");
  // A whole section as a YAML mapping.
  Config d = parse_config("", {"model.attn={n_heads: 4, n_kv_heads: 4}"});
  EXPECT_EQ(d.model.attn.n_heads, 4);
}

TEST(Config, SetErrors) {
  expect_error("", {"train.lrr=1"}, {"--set train.lrr=1", "unknown key 'train.lrr'", "Did you mean 'train.lr'"});
  expect_error("", {"train.lr"}, {"--set 'train.lr'", "key.path=value"});
  expect_error("", {"=3"}, {"key.path=value"});
  expect_error("", {"train.lr=fast"}, {"--set train.lr=fast", "train.lr must be a finite number, got 'fast'"});
  expect_error("", {"train.steps=1.5"}, {"train.steps must be an integer, got '1.5'"});
  expect_error("", {"model.layers=[gdn, attn"}, {"--set model.layers=[gdn, attn", "not valid YAML"});
  expect_error("", {"train.lr="}, {"--set train.lr=", "no value"});
  expect_error("", {"train.warmup_steps=5000"}, {"train.warmup_steps = 5000 must be <= train.steps = 1000"});
  expect_error("", {"bogus.key=1"}, {"unknown key 'bogus'", "The sections are"});
  expect_error("", {"train.lr.x=1"}, {"'train.lr' is a value, not a section"});
  expect_error("train: 3\n", {"train.lr=1"}, {"'train' in the config file is '3', not a section"});
}

TEST(Config, UnknownKeys) {
  expect_error("modle:\n  d_model: 3\n",
               {"test.yaml:1", "unknown key 'modle'", "Did you mean 'model'", "The sections are: model, data, train, run, parallel"});
  expect_error("model:\n  attn:\n    nheads: 4\n",
               {"test.yaml:3", "unknown key 'model.attn.nheads'", "Did you mean 'model.attn.n_heads'",
                "The keys of 'model.attn' are: n_heads, n_kv_heads, head_dim"});
  expect_error("model:\n  lr: 1e-3\n", {"unknown key 'model.lr'", "Did you mean 'train.lr'"});
  expect_error("train:\n  zzzzzzzz: 1\n", {"unknown key 'train.zzzzzzzz'", "The keys of 'train' are: batch_size"});
  expect_error("model:\n  attn: 3\n", {"'model.attn' is a section", "n_heads"});
}

TEST(Config, WrongTypes) {
  expect_error("model:\n  d_model: abc\n", {"test.yaml:2", "model.d_model must be an integer, got 'abc'"});
  expect_error("model:\n  d_model: 7.5\n", {"model.d_model must be an integer, got '7.5'"});
  expect_error("model:\n  d_model: 99999999999\n", {"model.d_model must be an integer"});
  expect_error("model:\n  d_model: [1, 2]\n", {"model.d_model must be an integer, got a list"});
  expect_error("model:\n  tie_embeddings: maybe\n", {"model.tie_embeddings must be true or false, got 'maybe'"});
  expect_error("train:\n  lr: .nan\n", {"train.lr must be a finite number"});
  expect_error("train:\n  seed: -1\n", {"train.seed must be a non-negative integer, got '-1'"});
  expect_error("data:\n  train: {a: 1}\n", {"data.train must be a string, got a mapping"});
  expect_error("train:\n  lr:\n", {"test.yaml:2", "train.lr has no value"});
  expect_error("- a\n- b\n", {"the top level must be a mapping"});
  expect_error("model:\n  layers: {gdn: 1}\n", {"model.layers must be a list of mixers"});
}

TEST(Config, InconsistentValues) {
  expect_error("model:\n  attn: {n_heads: 12, n_kv_heads: 5}\n",
               {"model.attn.n_heads = 12 must be divisible by model.attn.n_kv_heads = 5"});
  expect_error("model:\n  attn: {rotary_dim: 33}\n", {"model.attn.rotary_dim = 33 must be even"});
  expect_error("model:\n  attn: {rotary_dim: 128, head_dim: 64}\n",
               {"model.attn.rotary_dim = 128 must be <= model.attn.head_dim = 64"});
  expect_error("model:\n  gdn: {n_k_heads: 4, n_v_heads: 6}\n",
               {"model.gdn.n_v_heads = 6 must be divisible by model.gdn.n_k_heads = 4"});
  expect_error("model:\n  d_model: 0\n", {"model.d_model = 0 must be > 0"});
  expect_error("model:\n  d_ff: -3\n", {"model.d_ff = -3 must be > 0"});
  expect_error("train:\n  batch_size: 0\n", {"train.batch_size = 0 must be > 0"});
  expect_error("train:\n  seq_len: -1\n", {"train.seq_len = -1 must be > 0"});
  expect_error("train:\n  steps: 10\n  warmup_steps: 11\n", {"train.warmup_steps = 11 must be <= train.steps = 10"});
  expect_error("train:\n  lr: -1e-3\n  min_lr: 0\n", {"train.lr = -0.001 must be >= 0"});
  expect_error("train:\n  lr: 1e-3\n  min_lr: 2e-3\n", {"train.min_lr = 0.002 must be <= train.lr = 0.001"});
  expect_error("train:\n  beta2: 1.0\n", {"train.beta2 = 1 must be in [0, 1)"});
  expect_error("train:\n  eps: 0\n", {"train.eps = 0 must be > 0"});
  expect_error("run:\n  device: tpu\n", {"run.device = 'tpu' must be auto, cpu or cuda"});
  expect_error("run:\n  log_every: 0\n", {"run.log_every = 0 must be > 0"});
  expect_error("model:\n  mla: {qk_rope_head_dim: 7}\n", {"model.mla.qk_rope_head_dim = 7 must be even"});
  // Every broken rule is listed, not only the first.
  expect_error("model:\n  d_model: 0\ntrain:\n  eps: 0\n", {"model.d_model = 0", "train.eps = 0"});
}

TEST(Config, BadLayerPatterns) {
  expect_error("model:\n  layers: [gdn, gnd]\n", {"test.yaml:2", "unknown mixer 'gnd'", "gdn", "attn", "mla"});
  expect_error("model:\n  layers: \"[gdn, transformer] * 2\"\n", {"unknown mixer 'transformer'"});
  expect_error("model:\n  layers: []\n", {"model.layers is empty"});
  expect_error("model:\n  layers: \"[]\"\n", {"model.layers is empty"});
  expect_error("model:\n  layers: \"[gdn, attn] * 0\"\n", {"repeat count", "is 0"});
  expect_error("model:\n  layers: \"[gdn, attn] * x\"\n", {"expected a repeat count at column 15"});
  expect_error("model:\n  layers: \"[gdn, attn\"\n", {"expected ',' or ']'"});
  expect_error("model:\n  layers: \"[gdn] 3\"\n", {"expected '+', '*' or the end"});
  // Unquoted, the repeat form is not YAML: the message says to quote it.
  expect_error("model:\n  layers: [gdn, gdn, gdn, attn] * 3\n", {"test.yaml:2", "not valid YAML", "must be quoted"});
}

TEST(Config, TensorParallelSizes) {
  EXPECT_NO_THROW(parse_config("parallel: {tp: 4}\n"));  // 12 heads, vocab 50304: both divide by 4
  expect_error("parallel: {tp: 5}\n", {"model.gdn.n_k_heads = 12 must be divisible by parallel.tp = 5",
                                       "model.attn.n_heads = 12 must be divisible by parallel.tp = 5"});
  expect_error("parallel: {tp: 0}\n", {"parallel.tp = 0 must be > 0"});
  expect_error("model: {d_ff: 2050}\nparallel: {tp: 4}\n", {"model.d_ff = 2050 must be divisible by parallel.tp = 4"});
  // Fewer KV heads than ranks: replicated, so tp must be a multiple of them.
  EXPECT_NO_THROW(parse_config("model:\n  attn: {n_kv_heads: 2}\nparallel: {tp: 4}\n"));
  expect_error("model:\n  attn: {n_heads: 12, n_kv_heads: 3}\nparallel: {tp: 4}\n",
               {"parallel.tp = 4 must be divisible by model.attn.n_kv_heads = 3"});
  // Mixers that the pattern does not use are not held to the TP rule.
  EXPECT_NO_THROW(parse_config("model:\n  layers: [gdn]\n  attn: {n_heads: 3, n_kv_heads: 3}\nparallel: {tp: 4}\n"));
}

TEST(Config, LoadFileResolvesTheRunName) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("dt_config_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::path file = dir / "my_run.yaml";
  std::ofstream(file) << "train:\n  steps: 7\n  warmup_steps: 2\n";
  Config c = load_config(file.string(), {"train.lr=1e-3"});
  EXPECT_EQ(c.run.name, "my_run");
  EXPECT_EQ(c.train.steps, 7);
  EXPECT_EQ(c.train.lr, 1e-3);
  // The resolved config, written and loaded again, is the same config.
  fs::path written = dir / "config.yaml";
  std::ofstream(written) << config_to_yaml(c);
  EXPECT_TRUE(config_equal(load_config(written.string()), c));
  try {
    load_config((dir / "missing.yaml").string());
    ADD_FAILURE() << "no error for a missing file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing.yaml' not found"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

TEST(Config, ShippedConfigsLoad) {
  const std::string dir = std::string(DELTATRON_SOURCE_DIR) + "/configs/";
  Config q = load_config(dir + "quickstart.yaml");
  EXPECT_EQ(q.run.name, "quickstart");
  EXPECT_EQ(q.model.layers, parse_layer_pattern("[gdn, gdn, gdn, attn]"));
  Config h = load_config(dir + "hybrid_124m.yaml");
  Config s = load_config(dir + "softmax_124m.yaml");
  EXPECT_EQ(h.model.layers, parse_layer_pattern("[gdn, gdn, gdn, attn] * 3"));
  EXPECT_EQ(s.model.layers, parse_layer_pattern("attn * 12"));
  for (const Config* c : {&h, &s}) {
    EXPECT_EQ(c->model.d_model, 768);
    EXPECT_EQ(c->model.d_ff, 2048);
    EXPECT_EQ(c->model.vocab_size, 50304);
    EXPECT_EQ(c->model.attn.n_heads, 12);
    EXPECT_EQ(c->model.attn.head_dim, 64);
    EXPECT_EQ(c->train.batch_size, 16);
    EXPECT_EQ(c->train.seq_len, 1024);
  }
  // The two differ only in the layer pattern and the run name.
  Config s_as_h = s;
  s_as_h.model.layers = h.model.layers;
  s_as_h.run.name = h.run.name;
  EXPECT_TRUE(config_equal(s_as_h, h));
}

}  // namespace
}  // namespace dt
