// Helpers for the trainer tests: a scratch directory, tiny shards, a tiny config, metrics reading,
// and running the `deltatron` binary.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/shard.h"
#include "trainer/config.h"

namespace dt::trainer_testing {

namespace fs = std::filesystem;

// A fresh directory per test, removed afterwards.
class ScratchDir {
 public:
  ScratchDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() / (std::string("dt_trainer_") + info->test_suite_name() + "_" + info->name() +
                                         "_" + std::to_string(::getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// A learnable token stream over a vocabulary of 64: runs of an arithmetic pattern with noise-free
// structure, different in train and val.
inline void write_tiny_shards(const std::string& dir) {
  auto make = [](int n, int offset) {
    std::vector<uint16_t> t(n);
    for (int i = 0; i < n; ++i) t[i] = static_cast<uint16_t>((3 * i + (i / 17) * 5 + offset) % 61);
    return t;
  };
  std::vector<uint16_t> train = make(3000, 0), val = make(700, 7);
  write_shard(dir + "/tiny_train_000001.bin", train);
  write_shard(dir + "/tiny_val_000000.bin", val);
}

// A two-layer hybrid small enough for a test to train in well under a second per step.
inline Config tiny_config(const std::string& shard_dir) {
  Config c = default_config();
  c.model.vocab_size = 64;
  c.model.d_model = 32;
  c.model.d_ff = 48;
  c.model.layers = parse_layer_pattern("[gdn, attn]");
  c.model.attn = {.n_heads = 2, .n_kv_heads = 1, .head_dim = 16, .rotary_dim = 8, .rope_theta = 10000.0,
                  .qk_norm = true, .output_gate = true};
  c.model.gdn.n_k_heads = 1;
  c.model.gdn.n_v_heads = 2;
  c.model.gdn.head_k_dim = 16;
  c.model.gdn.head_v_dim = 8;
  c.model.gdn.chunk_size = 8;  // T = 20 is not a multiple: the last chunk is partial
  c.data.train = shard_dir + "/tiny_train_*.bin";
  c.data.val = shard_dir + "/tiny_val_*.bin";
  c.train.batch_size = 3;
  c.train.seq_len = 20;
  c.train.steps = 8;
  c.train.warmup_steps = 2;
  c.train.lr = 1e-2;
  c.train.min_lr = 1e-3;
  c.train.eval_every = 3;
  c.train.eval_batches = 2;
  c.run.threads = 1;
  c.run.log_every = 2;
  c.run.name = "tiny";
  return c;
}

// The lines of metrics.jsonl, parsed.
inline std::vector<nlohmann::json> read_metrics(const std::string& run_dir) {
  std::ifstream in(run_dir + "/metrics.jsonl");
  EXPECT_TRUE(in.good()) << "no metrics.jsonl in " << run_dir;
  std::vector<nlohmann::json> lines;
  std::string line;
  while (std::getline(in, line)) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

struct RunResult {
  int exit_code = -1;
  std::string out, err;
};

// Runs `deltatron <args>` (args already shell-quoted) from `cwd`.
inline RunResult run_deltatron(const std::string& args, const std::string& scratch, const std::string& cwd = ".") {
  std::string out = scratch + "/stdout.txt", err = scratch + "/stderr.txt";
  std::string cmd = "cd '" + cwd + "' && '" DELTATRON_BINARY "' " + args + " >'" + out + "' 2>'" + err + "' </dev/null";
  int status = std::system(cmd.c_str());
  RunResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_text(out);
  r.err = read_text(err);
  return r;
}

}  // namespace dt::trainer_testing
