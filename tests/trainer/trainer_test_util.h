// Helpers for the trainer tests: a scratch directory, tiny shards, a tiny config, metrics reading,
// and running the `deltatron` binary.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/manifest.h"
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
  write_manifest(dir + "/tiny.manifest.json", manifest_of_files(dir, "tiny"));
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

// Bitwise equality of two doubles (== would call -0 and 0 equal, and NaN unequal to itself).
inline bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof(double)) == 0; }

// step -> value of `key` over the metrics lines that carry it; a step that appears twice is a failure.
inline std::map<int, double> values_by_step(const std::vector<nlohmann::json>& metrics, const char* key) {
  std::map<int, double> out;
  for (const nlohmann::json& m : metrics) {
    if (!m.contains(key)) continue;
    int step = m["step"].get<int>();
    EXPECT_FALSE(out.count(step)) << "step " << step << " has two '" << key << "' lines";
    out[step] = m[key].is_null() ? std::numeric_limits<double>::quiet_NaN() : m[key].get<double>();
  }
  return out;
}

// Expects both maps to hold the same steps with bitwise equal values.
inline void expect_same_bits(const std::map<int, double>& a, const std::map<int, double>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (auto ia = a.begin(), ib = b.begin(); ia != a.end(); ++ia, ++ib) {
    ASSERT_EQ(ia->first, ib->first) << what;
    EXPECT_TRUE(same_bits(ia->second, ib->second))
        << what << " at step " << ia->first << ": " << fmt::format("{:.17g} vs {:.17g}", ia->second, ib->second);
  }
}

// Writes `cfg` as YAML to `path` and returns the path.
inline std::string write_config(const std::string& path, const Config& cfg) {
  write_text(path, config_to_yaml(cfg));
  return path;
}

// A failed `deltatron` run: exit code 1, `deltatron: error: ` on stderr, and `piece` in the message.
inline void expect_cli_error(const RunResult& r, const std::string& piece) {
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err.rfind("deltatron: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(piece), std::string::npos) << "expected '" << piece << "' in: " << r.err;
}

}  // namespace dt::trainer_testing
