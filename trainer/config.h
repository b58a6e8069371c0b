// The run's configuration: what a YAML file with the sections `model`, `data`,
// `train`, `run` and `parallel` resolves to (docs/config.md lists every key).
//
//   Config c = load_config("configs/quickstart.yaml", {"train.steps=50"});
//   std::string yaml = config_to_yaml(c);   // written to <run dir>/config.yaml
//   parse_config(yaml) gives back exactly c (config_equal).
//
// Every key has a default (default_config()); an unknown key, a value of the
// wrong type or a value that breaks a rule is a dt::Error naming the key path,
// the value and the rule.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "layers/model_config.h"

namespace dt {

struct DataConfig {
  std::string train = "shards/fineweb_edu_sample/fineweb_edu_train_*.bin";  // glob, relative to the cwd
  std::string val = "shards/fineweb_edu_sample/fineweb_edu_val_*.bin";
  bool shuffle = true;  // shuffle the train windows each epoch (validation is never shuffled)
  bool require_manifest = true;  // a glob needs its directory's prepare manifest (data/manifest.h)
};

struct TrainConfig {
  int batch_size = 16;      // B sequences per micro-batch
  int grad_accum = 1;       // micro-batches per optimizer step (a step sees grad_accum * B sequences)
  int seq_len = 1024;       // T tokens per sequence
  int steps = 1000;         // optimizer steps
  double lr = 6e-4;         // peak learning rate
  double min_lr = 6e-5;     // reached by the cosine at the last step
  int warmup_steps = 100;   // linear warmup: step s <= warmup_steps uses lr * s / warmup_steps
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double grad_clip = 1.0;   // max global gradient norm; 0 disables clipping
  int max_skips_in_a_row = 10;  // non-finite loss/gradient: the update is skipped; this many in a row stop the run
  int eval_every = 100;     // validation every this many steps (0: only at the end)
  int eval_batches = 20;    // batches of the val shard per validation (0: no validation)
  int checkpoint_every = 0; // save <run dir>/checkpoints/step_XXXXXXXX.h5 every this many steps and at the end (0: never)
  int keep_last = 3;        // checkpoints kept; older ones are deleted once a newer one is complete
  bool save_optimizer = true;  // false: checkpoints hold the weights only (eval, not --resume)
  uint64_t seed = 1337;     // parameter init and data order
};

// The tokens a validation set needs for `t.eval_batches` batches of batch_size x seq_len on
// `dp_size` data-parallel ranks, in one shard: windows of seq_len + 1 tokens start every seq_len.
inline int64_t eval_tokens_needed(const TrainConfig& t, int dp_size = 1) {
  return static_cast<int64_t>(t.eval_batches) * t.batch_size * dp_size * t.seq_len + 1;
}

struct RunConfig {
  std::string dir = "runs";   // run directories live in dir/name
  std::string name = "";      // empty: the config file's stem (`run` without a file)
  std::string device = "auto";  // auto | cpu | cuda
  int threads = 0;            // OpenBLAS threads; 0: all cores
  int log_every = 10;         // progress line / log.txt every this many steps
};

struct ParallelConfig {
  int tp = 1;  // tensor-parallel size; head counts must divide by it
  bool zero1 = false;             // ZeRO-1: AdamW's moments sharded over the DP ranks (dp > 1)
  bool overlap_grad_sync = true;  // DP gradient buckets start during the backward
  double bucket_mb = 25;          // DP gradient bucket size, MiB
  double timeout_s = 600;         // a collective waiting longer than this for the other ranks ends the job
};

struct Config {
  ModelConfig model;
  DataConfig data;
  TrainConfig train;
  RunConfig run;
  ParallelConfig parallel;
};

// The defaults: the 124M hybrid, [gdn, gdn, gdn, attn] * 3.
Config default_config();

// Reads the YAML file at `path`, applies the `--set key.path=value` overrides
// (values parsed as YAML), checks and validates. An empty run.name becomes the
// file's stem.
Config load_config(const std::string& path, const std::vector<std::string>& sets = {});

// Same from YAML text; `source` names it in messages. Without a file, an empty
// run.name stays empty (resolve it with the stem yourself).
Config parse_config(const std::string& yaml_text, const std::vector<std::string>& sets = {},
                    const std::string& source = "<config>");

// Throws one dt::Error listing every broken rule (key, value, rule).
void validate_config(const Config& c);

// The resolved config as YAML; parse_config of it gives back an equal config.
std::string config_to_yaml(const Config& c);

// Field-by-field equality (doubles compared exactly).
bool config_equal(const Config& a, const Config& b);

// Every leaf key path, in file order ("model.vocab_size", ..., "parallel.tp").
std::vector<std::string> config_keys();

// Every leaf key with its value as it reads in YAML ("train.lr" -> "0.0006", "model.layers" ->
// "[gdn, gdn, gdn, attn] * 3"), in file order. For messages that compare two configs.
std::vector<std::pair<std::string, std::string>> config_values(const Config& c);

// Layer patterns: "[gdn, gdn, gdn, attn] * 3", "[mla] + [gdn, gdn] * 2", "gdn * 4".
// `key` names the setting in errors.
std::vector<MixerKind> parse_layer_pattern(const std::string& text, const std::string& key = "model.layers");
// The shortest form: "[gdn, gdn, gdn, attn] * 3", or "[gdn, attn, mla]" when nothing repeats.
std::string layer_pattern_to_string(const std::vector<MixerKind>& layers);

}  // namespace dt
