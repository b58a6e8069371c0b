// Bad values for every config key, through the binary (`deltatron train --print-config`, which reads,
// checks and prints the config): each must exit 1 with `deltatron: error: ` naming the key, the value
// and the rule. The loops take their keys from docs/config.md, so a new key is fed bad values as
// soon as it is documented; a key whose rule does not fit a loop must be listed here on purpose.
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "tests/apps/bad_input_util.h"
#include "trainer/config.h"

namespace dt {
namespace {

using namespace bad_input;

// The keys of docs/config.md's tables (`| `key` | `default` | meaning |`), in file order.
std::vector<std::string> documented_keys() {
  std::ifstream in(std::string(DELTATRON_SOURCE_DIR) + "/docs/config.md");
  EXPECT_TRUE(in.good()) << "cannot read docs/config.md";
  const std::regex row(R"(^\| `([a-z_0-9.]+)` \| `[^`]*` \|)");
  std::vector<std::string> keys;
  std::string line;
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_search(line, m, row)) keys.push_back(m[1]);
  return keys;
}

enum class Kind { kInteger, kCount, kNumber, kBool, kOther };

// What a key holds, read from the error the config reader gives for the word `abc`.
Kind kind_of(const std::string& key) {
  try {
    parse_config("", {key + "=abc"});
  } catch (const Error& e) {
    const std::string msg = e.what();
    if (msg.find("must be an integer") != std::string::npos) return Kind::kInteger;
    if (msg.find("must be a non-negative integer") != std::string::npos) return Kind::kCount;
    if (msg.find("must be a finite number") != std::string::npos) return Kind::kNumber;
    if (msg.find("must be true or false") != std::string::npos) return Kind::kBool;
  }
  return Kind::kOther;
}

// "model.attn.n_heads", "{x: 1}" -> "model: {attn: {n_heads: {x: 1}}}".
std::string nested_yaml(const std::string& key, const std::string& value) {
  std::string open, close;
  size_t start = 0;
  for (size_t dot; (dot = key.find('.', start)) != std::string::npos; start = dot + 1) {
    open += key.substr(start, dot - start) + ": {";
    close += "}";
  }
  return open + key.substr(start) + ": " + value + close + "\n";
}

// Keys whose value may be any string: a wrong type (a mapping, a list) is their only bad value,
// besides the empty string where a rule forbids it.
const std::set<std::string> kAnyString = {"data.train", "data.val", "run.dir", "run.name"};

// Numeric keys for which 0 is a valid value, each with what 0 means.
const std::set<std::string> kZeroAllowed = {
    "model.attn.rotary_dim",      // no RoPE
    "model.mla.q_lora_rank",      // a direct q_proj
    "model.mla.qk_nope_head_dim", // RoPE dims only
    "model.gdn.chunk_size",       // the token-by-token recurrence
    "train.lr",                   // (with min_lr 0) no update
    "train.min_lr",
    "train.warmup_steps",         // no warmup
    "train.weight_decay",
    "train.beta1",
    "train.beta2",
    "train.grad_clip",            // no clipping
    "train.eval_every",           // only after the last step
    "train.eval_batches",         // no validation
    "train.checkpoint_every",     // no checkpoints
    "train.keep_last",            // (with checkpoint_every 0)
    "train.seed",
    "run.threads",                // all cores
};

class BadConfig : public BadInput {
 protected:
  void SetUp() override {
    BadInput::SetUp();
    keys_ = documented_keys();
    ASSERT_GT(keys_.size(), 40u);
    for (const std::string& k : keys_) kinds_[k] = kind_of(k);
  }
  std::vector<std::string> keys_of(std::initializer_list<Kind> kinds) const {
    std::vector<std::string> out;
    for (const std::string& k : keys_)
      if (std::find(kinds.begin(), kinds.end(), kinds_.at(k)) != kinds.end()) out.push_back(k);
    return out;
  }
  // `deltatron train --print-config --set S...`, each S one shell word.
  CliResult print_config(const std::vector<std::string>& sets) {
    std::string args = "train --print-config";
    for (const std::string& s : sets) args += " --set " + quote(s);
    return run(args);
  }

  std::vector<std::string> keys_;
  std::map<std::string, Kind> kinds_;
};

// A wrong type, in a file: every key given a mapping is an error naming the file, the line and the key.
TEST_F(BadConfig, EveryKeyRejectsAMapping) {
  EXPECT_EQ(keys_, config_keys()) << "docs/config.md and the code list different keys";
  for (const std::string& key : keys_) {
    write_file(path("c.yaml"), "# a comment, so the key sits on line 2\n" + nested_yaml(key, "{x: 1}"));
    expect_error(run("train --print-config --config " + qpath("c.yaml")),
                 {path("c.yaml") + ":2: " + key + " must be", "got a mapping"}, key);
  }
}

// A word where a number, a boolean, a layer pattern or a device belongs, through --set.
TEST_F(BadConfig, EveryKeyRejectsAWordUnlessItIsAString) {
  for (const std::string& key : keys_) {
    const CliResult r = print_config({key + "=abc"});
    if (kAnyString.count(key)) {
      EXPECT_EQ(r.code, 0) << key << " is listed as taking any string: " << r.err;
      continue;
    }
    expect_error(r, {key, "abc"}, key);
    if (kinds_[key] != Kind::kOther) {
      EXPECT_NE(r.err.find("--set " + key + "=abc"), std::string::npos) << r.err;
    }
  }
  for (const std::string& key : kAnyString) {
    EXPECT_NE(std::find(keys_.begin(), keys_.end(), key), keys_.end()) << key << " is no longer a key";
    expect_error(print_config({key + "=[a, b]"}), {key + " must be a string, got a list"}, key);
  }
}

// In-process (parse_config is what the binary calls; the word test above shows how the binary reports
// these errors), to keep the test quick: integers reject fractions and values beyond their range,
// numbers reject NaN and infinity.
TEST_F(BadConfig, IntegerKeysRejectFractionsAndNumberKeysNonFiniteValues) {
  auto expect_config_error = [](const std::string& set, const std::string& piece) {
    try {
      parse_config("", {set});
      ADD_FAILURE() << "--set " << set << " is accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(piece), std::string::npos) << "expected '" << piece << "' in: " << e.what();
    }
  };
  const std::vector<std::string> ints = keys_of({Kind::kInteger, Kind::kCount});
  ASSERT_GT(ints.size(), 25u);
  for (const std::string& key : ints) {
    expect_config_error(key + "=1.5", "--set " + key + "=1.5: " + key + " must be");
    expect_config_error(key + "=1e3", key + " must be");
    expect_config_error(key + "=99999999999999999999", key + " must be");
  }
  const std::vector<std::string> numbers = keys_of({Kind::kNumber});
  ASSERT_GT(numbers.size(), 8u);
  for (const std::string& key : numbers)
    for (const char* v : {"nan", "inf", "-inf", ".nan", "1e999"})
      expect_config_error(key + "=" + v, key + " must be a finite number, got '" + v + "'");
}

// Every numeric key given -1 at once: one error that lists each of them (every broken rule is
// listed, not only the first). The unsigned seed rejects it as a type error.
TEST_F(BadConfig, EveryNumericKeyRejectsMinusOne) {
  const std::vector<std::string> numeric = keys_of({Kind::kInteger, Kind::kNumber});
  std::vector<std::string> sets;
  for (const std::string& key : numeric) sets.push_back(key + "=-1");
  const CliResult r = print_config(sets);
  expect_error(r, {"invalid config:"}, "every numeric key = -1");
  for (const std::string& key : numeric)
    EXPECT_NE(r.err.find("  - " + key + " = -1 must be"), std::string::npos) << key << " accepts -1:\n" << r.err;
  for (const std::string& key : keys_of({Kind::kCount}))
    expect_error(print_config({key + "=-1"}), {key + " must be a non-negative integer, got '-1'"}, key);
}

// Every numeric key given 0 at once: those not in kZeroAllowed are each named as needing > 0.
TEST_F(BadConfig, ZeroOnlyWhereItMeansSomething) {
  const std::vector<std::string> numeric = keys_of({Kind::kInteger, Kind::kCount, Kind::kNumber});
  std::vector<std::string> sets;
  for (const std::string& key : numeric) sets.push_back(key + "=0");
  const CliResult r = print_config(sets);
  expect_error(r, {"invalid config:"}, "every numeric key = 0");
  for (const std::string& key : numeric) {
    const bool named = r.err.find("  - " + key + " = 0 must be") != std::string::npos;
    EXPECT_EQ(named, kZeroAllowed.count(key) == 0)
        << key << (named ? " rejects 0 but is listed in kZeroAllowed" : " accepts 0; list it in kZeroAllowed with what "
                                                                        "0 means, or give it a rule")
        << "\n" << r.err;
  }
  for (const std::string& key : kZeroAllowed)
    EXPECT_NE(std::find(numeric.begin(), numeric.end(), key), numeric.end()) << key << " is no longer a numeric key";
}

// The rules that tie values together, and the other value rules, one case each.
TEST_F(BadConfig, RulesBetweenKeysAndOtherValueRules) {
  struct Case {
    std::vector<std::string> sets;
    std::vector<std::string> pieces;
  };
  for (const Case& c : std::vector<Case>{
           {{"train.beta1=1"}, {"train.beta1 = 1 must be in [0, 1)"}},
           {{"train.beta2=1.5"}, {"train.beta2 = 1.5 must be in [0, 1)"}},
           {{"model.attn.rotary_dim=7"}, {"model.attn.rotary_dim = 7 must be even"}},
           {{"model.attn.rotary_dim=128"}, {"model.attn.rotary_dim = 128 must be <= model.attn.head_dim = 64"}},
           {{"model.mla.qk_rope_head_dim=7"}, {"model.mla.qk_rope_head_dim = 7 must be even"}},
           {{"model.attn.n_kv_heads=5"}, {"model.attn.n_heads = 12 must be divisible by model.attn.n_kv_heads = 5"}},
           {{"model.gdn.n_v_heads=18"}, {"model.gdn.n_v_heads = 18 must be divisible by model.gdn.n_k_heads = 12"}},
           {{"train.min_lr=0.1"}, {"train.min_lr = 0.1 must be <= train.lr = 0.0006"}},
           {{"train.warmup_steps=2000"}, {"train.warmup_steps = 2000 must be <= train.steps = 1000"}},
           {{"train.checkpoint_every=5", "train.keep_last=0"},
            {"train.keep_last = 0 must be >= 1 when train.checkpoint_every = 5 > 0"}},
           {{"data.train=''"}, {"data.train is empty"}},
           {{"data.val=''"}, {"data.val is empty", "train.eval_batches: 0"}},
           {{"run.dir=''"}, {"run.dir is empty"}},
           {{"run.device=tpu"}, {"run.device = 'tpu' must be auto, cpu or cuda"}},
           {{"parallel.tp=5"}, {"model.attn.n_heads = 12 must be divisible by parallel.tp = 5",
                              "model.vocab_size = 50304 must be divisible by parallel.tp = 5"}},
           {{"model.d_model=99999999999"}, {"model.d_model must be an integer, got '99999999999'"}},
           {{"train.seed=18446744073709551616"}, {"train.seed must be a non-negative integer"}},
           {{"train.lr=.inf"}, {"train.lr must be a finite number, got '.inf'"}},
           {{"model.tie_embeddings=2"}, {"model.tie_embeddings must be true or false, got '2'"}},
           {{"model.layers=[gdn, rnn]"}, {"model.layers: unknown mixer 'rnn'", "gdn", "attn", "mla"}},
           {{"model.layers=[]"}, {"model.layers is empty"}},
           {{"model.layers=[[gdn]]"}, {"model.layers: each entry must be a mixer name"}},
           {{"model.layers=\"[gdn] * 0\""}, {"the repeat count in \"[gdn] * 0\" is 0"}},
           {{"model.layers=\"[gdn, attn\""}, {"expected ',' or ']' at column"}},
           {{"model.layers=\"[gdn] 3\""}, {"expected '+', '*' or the end at column"}},
       }) {
    expect_error(print_config(c.sets), c.pieces, c.sets.front());
  }
}

// The YAML file and the --set syntax.
TEST_F(BadConfig, FileAndSetSyntax) {
  struct Case {
    std::string yaml;
    std::vector<std::string> pieces;
  };
  for (const Case& c : std::vector<Case>{
           {"model:\n  layers: [gdn, gdn, gdn, attn] * 3\n", {":2:", "not valid YAML", "must be quoted"}},
           {"model: {d_model: 3\n", {"not valid YAML"}},
           {"- model\n- train\n", {"the top level must be a mapping"}},
           {"just words\n", {"the top level must be a mapping", "got 'just words'"}},
           {"model:\n  attn:\n    nheads: 4\n",
            {":3: unknown key 'model.attn.nheads'", "Did you mean 'model.attn.n_heads'", "The keys of 'model.attn'"}},
           {"modle:\n  d_model: 3\n", {":1: unknown key 'modle'", "The sections are: model, data, train, run"}},
           {"model: 3\n", {"'model' is a section", "not '3'"}},
           {"train:\n  lr:\n", {":2: train.lr has no value"}},
           {"train:\n  [a]: 1\n", {"keys must be names"}},
       }) {
    write_file(path("c.yaml"), c.yaml);
    std::vector<std::string> pieces = c.pieces;
    pieces[0] = pieces[0].rfind(':', 0) == 0 ? path("c.yaml") + pieces[0] : pieces[0];
    expect_error(run("train --print-config --config " + qpath("c.yaml")), pieces, c.yaml);
  }
  for (const Case& c : std::vector<Case>{
           {"train.lr", {"--set 'train.lr': expected key.path=value"}},
           {"=3", {"expected key.path=value"}},
           {"train.lr=", {"--set train.lr=: no value given"}},
           {"train.lrr=1", {"--set train.lrr=1: unknown key 'train.lrr'", "Did you mean 'train.lr'"}},
           {"train.lr.x=1", {"'train.lr' is a value, not a section"}},
           {"model.layers=[gdn, attn", {"--set model.layers=[gdn, attn: the value is not valid YAML"}},
           {"model.attn=3", {"--set model.attn=3", "'model.attn' is a section"}},
       })
    expect_error(print_config({c.yaml}), c.pieces, c.yaml);
  // --set into a section that the file gives a plain value.
  write_file(path("c.yaml"), "train: 3\n");
  expect_error("train --print-config --config " + qpath("c.yaml") + " --set train.lr=1",
               {"'train' in the config file is '3', not a section"});
}

}  // namespace
}  // namespace dt
