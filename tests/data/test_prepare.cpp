// `prepare`: documents -> shards, against an independent reference; thread-count independence;
// every bad input; and the `deltatron prepare` command end to end with the real tokenizer.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "core/error.h"
#include "data/prepare.h"
#include "data/shard.h"
#include "data/shard_set.h"
#include "data/tokenizer.h"
#include "tests/data/data_test_util.h"
#include "trainer/config.h"

namespace dt {
namespace {

namespace fs = std::filesystem;
using testing::read_bytes;
using testing::run_deltatron;
using testing::ScratchDir;
using testing::write_bytes;

// A stand-in tokenizer: one id per byte. Its work varies from document to document so that, with
// several threads, documents finish out of order.
std::vector<int32_t> byte_encode(std::string_view text) {
  if (text.size() % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(text.size() % 200));
  return std::vector<int32_t>(text.begin(), text.end());
}

std::string jsonl_line(const std::string& text) { return nlohmann::json{{"text", text}}.dump() + "\n"; }

std::vector<std::string> random_docs(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::string> docs(n);
  for (auto& d : docs) {
    d.resize(1 + rng() % 400);
    for (auto& c : d) c = static_cast<char>('a' + rng() % 26);
  }
  return docs;
}

std::string write_jsonl(const ScratchDir& dir, const std::string& name, const std::vector<std::string>& docs) {
  std::string s;
  for (const auto& d : docs) s += jsonl_line(d);
  write_bytes(dir / name, s);
  return dir / name;
}

// The reference: every document as [EOT, bytes...]; the first `val` documents form the validation
// shard; the rest, concatenated, cut every `shard_tokens`.
std::vector<std::vector<uint16_t>> reference_shards(const std::vector<std::string>& docs, int val,
                                                    size_t shard_tokens) {
  std::vector<std::vector<uint16_t>> shards;
  std::vector<uint16_t> v, rest;
  for (size_t i = 0; i < docs.size(); ++i) {
    auto& dst = static_cast<int>(i) < val ? v : rest;
    dst.push_back(50256);
    for (unsigned char c : docs[i]) dst.push_back(c);
  }
  if (val > 0) shards.push_back(v);
  for (size_t at = 0; at < rest.size(); at += shard_tokens) {
    shards.emplace_back(rest.begin() + at, rest.begin() + std::min(rest.size(), at + shard_tokens));
  }
  return shards;
}

std::vector<std::string> bin_files(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".bin") files.push_back(e.path().string());
  }
  // Validation first, then train shards by index (as prepare writes them).
  std::sort(files.begin(), files.end(), [](const std::string& a, const std::string& b) {
    const bool va = a.find("_val_") != std::string::npos, vb = b.find("_val_") != std::string::npos;
    return va != vb ? va : a < b;
  });
  return files;
}

// The automatic validation target of these tests: about ten of random_docs' documents.
constexpr int64_t kAutoValTokens = 2000;

// How many of the first documents hold at least `tokens` tokens as [EOT, bytes...] (docs.size() + 1: never).
int64_t docs_holding(const std::vector<std::string>& docs, int64_t tokens) {
  int64_t sum = 0;
  for (size_t i = 0; i < docs.size(); ++i)
    if ((sum += static_cast<int64_t>(docs[i].size()) + 1) >= tokens) return static_cast<int64_t>(i) + 1;
  return static_cast<int64_t>(docs.size()) + 1;
}

PrepareSummary run_prepare(const std::vector<std::string>& inputs, const std::string& out, int64_t val_docs = -1,
                           int64_t shard_tokens = 1000, int threads = 2, const std::string& name = "t",
                           int64_t val_tokens = -1, int64_t auto_val_tokens = kAutoValTokens) {
  PrepareOptions o;
  o.inputs = inputs;
  o.out_dir = out;
  o.val_docs = val_docs;
  o.val_tokens = val_tokens;
  o.auto_val_tokens = auto_val_tokens;
  o.auto_val_source = "the tests' target";
  o.shard_tokens = shard_tokens;
  o.threads = threads;
  o.name = name;
  return prepare_shards(o, byte_encode, nullptr);
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a dt::Error";
  return "";
}

TEST(Prepare, MatchesTheReferenceSplitAndChunking) {
  ScratchDir dir;
  const auto docs = random_docs(157, 1);
  const std::string in = write_jsonl(dir, "in.jsonl", docs);
  const PrepareSummary s = run_prepare({in}, dir / "out", -1, 997);
  const int64_t val = docs_holding(docs, kAutoValTokens);
  ASSERT_LE(val * 10, 157) << "the automatic split is not capped here";
  const auto expected = reference_shards(docs, static_cast<int>(val), 997);
  const auto files = bin_files(dir / "out");
  ASSERT_EQ(files.size(), expected.size());
  EXPECT_EQ(files[0], dir / "out/t_val_000000.bin");
  EXPECT_EQ(files[1], dir / "out/t_train_000001.bin");
  EXPECT_EQ(s.shards, files);
  for (size_t i = 0; i < files.size(); ++i) EXPECT_EQ(load_shard(files[i], 256 * 256), expected[i]) << files[i];
  EXPECT_EQ(s.documents, 157);
  EXPECT_EQ(s.val_documents, val);
  int64_t total = 0;
  for (const auto& e : expected) total += static_cast<int64_t>(e.size());
  EXPECT_EQ(s.val_tokens + s.train_tokens, total);
}

TEST(Prepare, OutputIsIdenticalForAnyThreadCount) {
  ScratchDir dir;
  const std::string in = write_jsonl(dir, "in.jsonl", random_docs(700, 2));
  run_prepare({in}, dir / "t1", -1, 15000, 1);
  const auto ref = bin_files(dir / "t1");
  ASSERT_GT(ref.size(), 3u);
  for (int threads : {2, 3, 8}) {
    const std::string out = dir / ("t" + std::to_string(threads));
    run_prepare({in}, out, -1, 15000, threads);
    const auto files = bin_files(out);
    ASSERT_EQ(files.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i) {
      EXPECT_EQ(read_bytes(files[i]), read_bytes(ref[i])) << threads << " threads, " << files[i];
    }
  }
}

TEST(Prepare, TextFilesAreOneDocumentEachAndFormatsMix) {
  ScratchDir dir;
  write_bytes(dir / "a.txt", "first document\nwith two lines\n");
  write_bytes(dir / "b.md", "second");
  write_bytes(dir / "c.json", jsonl_line("third") + "\n  \n" + jsonl_line("") + jsonl_line("fourth"));
  const PrepareSummary s = run_prepare({dir / "a.txt", dir / "b.md", dir / "c.json"}, dir / "out", 1);
  EXPECT_EQ(s.documents, 4);
  EXPECT_EQ(s.empty_skipped, 1);
  const auto expected = reference_shards({"first document\nwith two lines\n", "second", "third", "fourth"}, 1, 1000);
  const auto files = bin_files(dir / "out");
  ASSERT_EQ(files.size(), expected.size());
  for (size_t i = 0; i < files.size(); ++i) EXPECT_EQ(load_shard(files[i], 65536), expected[i]);
}

TEST(Prepare, ValidationSplitRule) {
  ScratchDir dir;
  struct Case {
    int docs;
    int64_t val_docs, val_tokens, auto_tokens;
    int64_t expect;  // validation documents
  };
  const auto docs_of = [](int n) { return random_docs(n, n); };
  for (Case c : {
           // Automatic: the documents holding the target, at most a tenth of the input (at least one).
           Case{170, -1, -1, kAutoValTokens, docs_holding(docs_of(170), kAutoValTokens)},
           Case{25, -1, -1, kAutoValTokens, 2},
           Case{99, -1, -1, int64_t{1} << 40, 9},
           Case{2, -1, -1, kAutoValTokens, 1},
           Case{150, -1, -1, 1, 1},
           // --val-docs: that many, all of them included (then no train shard), or none.
           Case{5, 4, -1, kAutoValTokens, 4},
           Case{5, 5, -1, kAutoValTokens, 5},
           Case{3, 0, -1, kAutoValTokens, 0},
           // --val-tokens: the documents until that many tokens, uncapped.
           Case{40, -1, 3000, kAutoValTokens, docs_holding(docs_of(40), 3000)},
           Case{40, -1, 0, kAutoValTokens, 0},
       }) {
    const std::string in = write_jsonl(dir, "in.jsonl", docs_of(c.docs));
    const std::string out = dir / fmt::format("out{}_{}_{}_{}", c.docs, c.val_docs, c.val_tokens, c.auto_tokens);
    const PrepareSummary s = run_prepare({in}, out, c.val_docs, 100000, 2, "t", c.val_tokens, c.auto_tokens);
    const std::string what = fmt::format("{} docs, --val-docs {}, --val-tokens {}, auto {}: {}", c.docs, c.val_docs,
                                         c.val_tokens, c.auto_tokens, s.val_rule);
    EXPECT_EQ(s.val_documents, c.expect) << what;
    EXPECT_FALSE(s.val_rule.empty());
    EXPECT_EQ(fs::exists(out + "/t_val_000000.bin"), c.expect > 0) << what;
    EXPECT_EQ(fs::exists(out + "/t_train_000001.bin"), c.expect < c.docs) << what;
    if (c.expect > 0) {
      const auto val = load_shard(out + "/t_val_000000.bin", 65536);
      EXPECT_EQ(shard_stats(val).n_documents, c.expect) << what;
      if (c.val_tokens > 0) {
        EXPECT_GE(static_cast<int64_t>(val.size()), c.val_tokens) << what;
      }
    }
  }
  // The summary says which rule chose the split.
  const std::string small = write_jsonl(dir, "small.jsonl", docs_of(25));
  EXPECT_NE(run_prepare({small}, dir / "r1").val_rule.find("a tenth of the 25 documents"), std::string::npos);
  const std::string big = write_jsonl(dir, "big.jsonl", docs_of(170));
  EXPECT_NE(run_prepare({big}, dir / "r2").val_rule.find("the default"), std::string::npos);
  EXPECT_NE(run_prepare({big}, dir / "r3", -1, 1000, 2, "t", 500).val_rule.find("--val-tokens 500"),
            std::string::npos);

  const std::string one = write_jsonl(dir, "one.jsonl", random_docs(1, 1));
  EXPECT_NE(error_of([&] { run_prepare({one}, dir / "o1"); }).find("--val-docs 0"), std::string::npos);
  EXPECT_EQ(run_prepare({one}, dir / "o2", 0).documents, 1);
  const std::string five = write_jsonl(dir, "five.jsonl", random_docs(5, 5));
  std::string msg = error_of([&] { run_prepare({five}, dir / "o3", 6); });
  EXPECT_NE(msg.find("the input holds 5 documents, fewer than the --val-docs 6"), std::string::npos) << msg;
  msg = error_of([&] { run_prepare({five}, dir / "o4", -1, 1000, 2, "t", 1 << 20); });
  EXPECT_NE(msg.find("fewer than the --val-tokens 1048576"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(dir / "o4/t_val_000000.bin")) << "a failed run leaves no shards";
}

TEST(Prepare, BadJsonLinesNameFileAndLine) {
  ScratchDir dir;
  struct Case {
    std::string line;
    std::string expect;
  };
  for (const Case& c : {Case{"{\"text\": \"unterminated}", "not valid JSON"},
                        Case{"{\"txt\": \"hello\"}", "no \"text\" field"}, Case{"{\"text\": 42}", "is a number"},
                        Case{"[\"text\"]", "a JSON array where an object"}, Case{"\"just a string\"", "string"}}) {
    const std::string in = dir / "bad.jsonl";
    write_bytes(in, jsonl_line("ok 1") + "\n" + jsonl_line("ok 2") + c.line + "\n" + jsonl_line("ok 3"));
    const std::string msg = error_of([&] { run_prepare({in}, dir / "out", 1); });
    EXPECT_NE(msg.find(in + ", line 4"), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.expect), std::string::npos) << msg;
  }
}

TEST(Prepare, EmptyAndMissingInputs) {
  ScratchDir dir;
  write_bytes(dir / "empty.jsonl", "");
  write_bytes(dir / "blank.jsonl", "\n\n  \n");
  write_bytes(dir / "empty_texts.jsonl", jsonl_line("") + jsonl_line(""));
  write_bytes(dir / "empty.txt", "");
  for (const char* f : {"empty.jsonl", "blank.jsonl", "empty_texts.jsonl", "empty.txt"}) {
    const std::string msg = error_of([&] { run_prepare({dir / f}, dir / "out"); });
    EXPECT_NE(msg.find("no documents in the input"), std::string::npos) << f << ": " << msg;
  }
  std::string msg = error_of([&] { run_prepare({dir / "empty.txt", dir / "missing.jsonl"}, dir / "out2"); });
  EXPECT_NE(msg.find("missing.jsonl: no such file"), std::string::npos) << msg;
  msg = error_of([&] { run_prepare({dir.str()}, dir / "out2"); });
  EXPECT_NE(msg.find("is a directory"), std::string::npos) << msg;
  EXPECT_NE(error_of([&] { run_prepare({}, dir / "out2"); }).find("no input files"), std::string::npos);
  // Every input is checked before the output directory is made (a typo fails at once, not hours in).
  EXPECT_FALSE(fs::exists(dir / "out2"));
}

TEST(Prepare, UnwritableOutput) {
  ScratchDir dir;
  const std::string in = write_jsonl(dir, "in.jsonl", random_docs(20, 3));
  write_bytes(dir / "file", "x");
  std::string msg = error_of([&] { run_prepare({in}, dir / "file"); });
  EXPECT_NE(msg.find("not a directory"), std::string::npos) << msg;
  msg = error_of([&] { run_prepare({in}, dir / "file/sub"); });
  EXPECT_NE(msg.find("cannot create the output directory"), std::string::npos) << msg;
  EXPECT_NE(msg.find("file/sub"), std::string::npos) << msg;
  if (::geteuid() != 0) {  // root may write anywhere
    fs::create_directories(dir / "ro");
    fs::permissions(dir / "ro", fs::perms::owner_read | fs::perms::owner_exec);
    msg = error_of([&] { run_prepare({in}, dir / "ro"); });
    EXPECT_NE(msg.find("cannot write in the output directory"), std::string::npos) << msg;
    fs::permissions(dir / "ro", fs::perms::owner_all);
  }
}

TEST(Prepare, ExistingShardsNeedOverwrite) {
  ScratchDir dir;
  const std::string big = write_jsonl(dir, "big.jsonl", random_docs(200, 4));
  run_prepare({big}, dir / "out", -1, 2000);
  const size_t n_big = bin_files(dir / "out").size();
  ASSERT_GT(n_big, 4u);
  const std::string small = write_jsonl(dir, "small.jsonl", random_docs(30, 5));
  const std::string msg = error_of([&] { run_prepare({small}, dir / "out", -1, 2000); });
  EXPECT_NE(msg.find("--overwrite"), std::string::npos) << msg;
  PrepareOptions o;
  o.inputs = {small};
  o.out_dir = dir / "out";
  o.name = "t";
  o.shard_tokens = 2000;
  o.auto_val_tokens = kAutoValTokens;
  o.overwrite = true;
  const PrepareSummary s = prepare_shards(o, byte_encode, nullptr);
  EXPECT_EQ(bin_files(dir / "out"), s.shards) << "stale shards of the bigger run are gone";
  run_prepare({small}, dir / "out", -1, 2000, 2, "other");  // another name sits beside them
  EXPECT_EQ(bin_files(dir / "out").size(), 2 * s.shards.size());
}

TEST(Prepare, FailureLateInTheInputRemovesWrittenShards) {
  ScratchDir dir;
  std::string s;
  for (const auto& d : random_docs(300, 6)) s += jsonl_line(d);
  for (const auto& d : random_docs(5000, 7)) s += jsonl_line(d);  // a second batch, so shards exist
  s += "{oops}\n";
  write_bytes(dir / "in.jsonl", s);
  const std::string msg = error_of([&] { run_prepare({dir / "in.jsonl"}, dir / "out", -1, 50000); });
  EXPECT_NE(msg.find("line 5301"), std::string::npos) << msg;
  EXPECT_TRUE(bin_files(dir / "out").empty());
}

// A failed --overwrite leaves the previous set byte for byte; a killed run's leftovers go next time.
TEST(Prepare, FailedOverwriteKeepsThePreviousSet) {
  ScratchDir dir;
  const std::string good = write_jsonl(dir, "good.jsonl", random_docs(200, 4));
  run_prepare({good}, dir / "out", -1, 2000);
  const std::vector<std::string> before = bin_files(dir / "out");
  ASSERT_GT(before.size(), 2u);
  std::vector<std::string> bytes;
  for (const std::string& f : before) bytes.push_back(read_bytes(f));
  std::string bad;
  for (const auto& d : random_docs(5000, 7)) bad += jsonl_line(d);  // shards get written before the error
  bad += "{oops}\n";
  write_bytes(dir / "bad.jsonl", bad);
  PrepareOptions o;
  o.inputs = {dir / "bad.jsonl"};
  o.out_dir = dir / "out";
  o.name = "t";
  o.shard_tokens = 50000;  // a few big shards are written before the error
  o.auto_val_tokens = kAutoValTokens;
  o.overwrite = true;
  EXPECT_NE(error_of([&] { prepare_shards(o, byte_encode, nullptr); }).find("line 5001"), std::string::npos);
  EXPECT_EQ(bin_files(dir / "out"), before);
  for (size_t i = 0; i < before.size(); ++i) EXPECT_EQ(read_bytes(before[i]), bytes[i]) << before[i];
  EXPECT_TRUE(shard_set_leftovers(dir / "out").empty());
  // What a killed run leaves: a staging directory. The next prepare of the name deletes it.
  std::filesystem::create_directories(std::string(dir / "out") + "/.t.prepare.tmp.abcdef");
  EXPECT_EQ(shard_set_leftovers(dir / "out").size(), 1u);
  o.inputs = {good};
  o.shard_tokens = 2000;
  prepare_shards(o, byte_encode, nullptr);
  EXPECT_TRUE(shard_set_leftovers(dir / "out").empty());
  EXPECT_EQ(bin_files(dir / "out"), before);
}

TEST(Prepare, TokenizerIdsMustFitUint16) {
  ScratchDir dir;
  const std::string in = write_jsonl(dir, "in.jsonl", random_docs(20, 8));
  PrepareOptions o;
  o.inputs = {in};
  o.out_dir = dir / "out";
  o.auto_val_tokens = kAutoValTokens;
  const std::string msg =
      error_of([&] { prepare_shards(o, [](std::string_view) { return std::vector<int32_t>{70000}; }, nullptr); });
  EXPECT_NE(msg.find("70000"), std::string::npos) << msg;
}

TEST(Prepare, BadShardTokens) {
  ScratchDir dir;
  const std::string in = write_jsonl(dir, "in.jsonl", random_docs(20, 9));
  EXPECT_NE(error_of([&] { run_prepare({in}, dir / "out", -1, 0); }).find("--shard-tokens"), std::string::npos);
  EXPECT_NE(error_of([&] { run_prepare({in}, dir / "out", -1, int64_t{1} << 31); }).find("--shard-tokens"),
            std::string::npos);
}

// ---- the `deltatron prepare` command, with the real GPT-2 tokenizer ----

std::vector<std::string> asset_texts(size_t n) {
  std::ifstream f(testing::asset("fineweb-edu/fineweb_edu.jsonl"));
  std::vector<std::string> texts;
  std::string line;
  while (texts.size() < n && std::getline(f, line)) texts.push_back(nlohmann::json::parse(line)["text"].get<std::string>());
  return texts;
}

TEST(PrepareCli, FinewebEduSampleRoundTripsThroughTheTokenizer) {
  ScratchDir dir;
  const std::string in = testing::asset("fineweb-edu/fineweb_edu.jsonl");
  auto r = run_deltatron("prepare --input '" + in + "' --out '" + dir.str() + "/a' --shard-tokens 60000 --threads 1",
                         dir.str());
  ASSERT_EQ(r.code, 0) << r.err;
  // The sample is smaller than the default evaluation needs: a tenth of its 170 documents.
  const TrainConfig defaults;
  EXPECT_NE(r.out.find(fmt::format("validation: the first 17 documents (a tenth of the 170 documents: the default, "
                                   "{} tokens for the default evaluation's train.eval_batches x batch_size = {} x {} "
                                   "windows of {} + 1 tokens",
                                   eval_tokens_needed(defaults), defaults.eval_batches, defaults.batch_size,
                                   defaults.seq_len)),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.err.find("prepare: 170 documents"), std::string::npos) << r.err;  // the final progress line
  const auto files = bin_files(dir / "a");
  ASSERT_GE(files.size(), 4u);
  EXPECT_EQ(files[0], dir / "a/fineweb_edu_val_000000.bin");

  // The validation shard decodes back to the first 17 texts, each after an EOT.
  const Tokenizer tok = Tokenizer::load(Tokenizer::default_dir());
  const auto val = load_shard(files[0], tok.vocab_size());
  std::vector<std::string> decoded;
  for (uint16_t id : val) {
    if (id == 50256) decoded.emplace_back();
    else decoded.back() += tok.decode(std::vector<int32_t>{id});
  }
  EXPECT_EQ(val.front(), 50256);
  EXPECT_EQ(decoded, asset_texts(17));
  // The train shards are full except the last.
  int64_t docs = 0;
  for (size_t i = 1; i < files.size(); ++i) {
    const auto t = load_shard(files[i], tok.vocab_size());
    if (i + 1 < files.size()) {
      EXPECT_EQ(t.size(), 60000u);
    }
    docs += shard_stats(t).n_documents;
  }
  EXPECT_EQ(docs, 153);

  // More threads, or the same data through a pipe: the same bytes.
  r = run_deltatron("prepare --input '" + in + "' --out '" + dir.str() + "/b' --shard-tokens 60000 --threads 2",
                    dir.str());
  ASSERT_EQ(r.code, 0) << r.err;
  r = run_deltatron("prepare --input - --name fineweb_edu --out '" + dir.str() +
                        "/c' --shard-tokens 60000 --threads 3 < '" + in + "'",
                    dir.str());
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* other : {"b", "c"}) {
    const auto o = bin_files(dir / other);
    ASSERT_EQ(o.size(), files.size());
    for (size_t i = 0; i < o.size(); ++i) EXPECT_EQ(read_bytes(o[i]), read_bytes(files[i])) << o[i];
  }
}

TEST(PrepareCli, BadInputsExitOneWithAClearMessage) {
  ScratchDir dir;
  write_bytes(dir / "bad.jsonl", jsonl_line("fine") + "{\"text\": \n" + jsonl_line("fine"));
  write_bytes(dir / "notext.jsonl", jsonl_line("fine") + "{\"body\": \"x\"}\n");
  write_bytes(dir / "empty.jsonl", "");
  write_bytes(dir / "ok.jsonl", jsonl_line("one") + jsonl_line("two") + jsonl_line("three"));
  write_bytes(dir / "file", "");
  struct Case {
    std::string args, expect;
  };
  const std::string d = dir.str();
  for (const Case& c : {
           Case{"--input " + d + "/missing.jsonl --out " + d + "/o", "missing.jsonl: no such file"},
           Case{"--input " + d + "/bad.jsonl --out " + d + "/o", "bad.jsonl, line 2: not valid JSON"},
           Case{"--input " + d + "/notext.jsonl --out " + d + "/o", "notext.jsonl, line 2: the object has no \"text\""},
           Case{"--input " + d + "/empty.jsonl --out " + d + "/o", "no documents in the input"},
           Case{"--input " + d + "/ok.jsonl --out " + d + "/file/o", "cannot create the output directory"},
           Case{"--input " + d + "/ok.jsonl --out " + d + "/o --tokenizer " + d + "/nowhere", "nowhere"},
       }) {
    const auto r = run_deltatron("prepare " + c.args, d);
    EXPECT_EQ(r.code, 1) << c.args;
    EXPECT_EQ(r.err.rfind("deltatron: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace dt
