// Shard-set manifests: prepare writes one last, the loader's rule refuses partial or foreign sets
// unless told otherwise (data/manifest.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/manifest.h"
#include "data/prepare.h"
#include "data/shard.h"
#include "data/shard_set.h"
#include "tests/data/data_test_util.h"

namespace dt {
namespace {

namespace fs = std::filesystem;
using testing::ScratchDir;
using testing::write_bytes;

std::vector<int32_t> bytes_of(std::string_view s) { return std::vector<int32_t>(s.begin(), s.end()); }

PrepareSummary prepare_into(const std::string& out, const std::string& in) {
  PrepareOptions o;
  o.inputs = {in};
  o.out_dir = out;
  o.name = "s";
  o.val_docs = 1;
  o.shard_tokens = 300;
  return prepare_shards(o, [](std::string_view t) { return bytes_of(t); }, nullptr);
}

std::string error_of(const std::string& pattern, const std::vector<std::string>& paths, bool require) {
  try {
    check_shard_sets(pattern, paths, require, "data.train");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string docs_file(const ScratchDir& dir) {
  std::string text;
  for (int i = 0; i < 40; ++i) text += "{\"text\": \"document number " + std::to_string(i) + " with some words\"}\n";
  write_bytes(dir / "in.jsonl", text);
  return dir / "in.jsonl";
}

TEST(Manifest, PrepareWritesOneListingEveryShard) {
  ScratchDir dir;
  const PrepareSummary s = prepare_into(dir / "out", docs_file(dir));
  EXPECT_EQ(s.manifest, dir / "out/s.manifest.json");
  const ShardManifest m = read_manifest(s.manifest);
  ASSERT_EQ(m.shards.size(), s.shards.size());
  for (size_t i = 0; i < s.shards.size(); ++i) EXPECT_EQ(m.shards[i].file, fs::path(s.shards[i]).filename().string());
  EXPECT_EQ(m.inputs, std::vector<std::string>{dir / "in.jsonl"});
  EXPECT_TRUE(check_manifest_set(s.manifest, true).empty());
  EXPECT_FALSE(fs::exists(s.manifest + ".tmp"));
  // A shard changed after prepare fails the check.
  std::vector<uint16_t> other(static_cast<size_t>(m.shards.back().tokens), 7);
  write_shard(dir / ("out/" + m.shards.back().file), other);
  const auto problems = check_manifest_set(s.manifest, true);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("SHA-256"), std::string::npos) << problems[0];
}

TEST(Manifest, LoaderRefusesShardsTheManifestDoesNotList) {
  ScratchDir dir;
  const PrepareSummary s = prepare_into(dir / "out", docs_file(dir));
  const std::string glob = dir / "out/s_train_*.bin";
  std::vector<std::string> paths(s.shards.begin() + 1, s.shards.end());
  EXPECT_EQ(error_of(glob, paths, true), "");
  const std::string stray = dir / "out/s_train_000099.bin";
  write_shard(stray, std::vector<uint16_t>{1, 2, 3});
  paths.push_back(stray);
  const std::string msg = error_of(glob, paths, false);
  EXPECT_NE(msg.find(stray + " is not listed in the shard-set manifest"), std::string::npos) << msg;
}

TEST(Manifest, ForeignShardsNeedTheOptInForAGlob) {
  ScratchDir dir;
  fs::create_directories(dir / "llmc");
  const std::string a = dir / "llmc/x_train_000001.bin", b = dir / "llmc/x_train_000002.bin";
  write_shard(a, std::vector<uint16_t>{1, 2, 3});
  write_shard(b, std::vector<uint16_t>{4, 5, 6});
  const std::string glob = dir / "llmc/x_train_*.bin";
  const std::string msg = error_of(glob, {a, b}, true);
  EXPECT_NE(msg.find("data.require_manifest: false"), std::string::npos) << msg;
  EXPECT_EQ(error_of(glob, {a, b}, false), "");
  EXPECT_EQ(error_of(a, {a}, true), "") << "one file named by itself loads";
}

TEST(Manifest, LeftoversWithoutAManifestAreRefusedAlways) {
  ScratchDir dir;
  fs::create_directories(dir / "half/.x.prepare.tmp.abc123");
  const std::string a = dir / "half/x_train_000001.bin";
  write_shard(a, std::vector<uint16_t>{1, 2, 3});
  for (bool require : {true, false}) {
    const std::string msg = error_of(dir / "half/x_train_*.bin", {a}, require);
    EXPECT_NE(msg.find("leftovers of an interrupted `deltatron prepare`"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace dt
