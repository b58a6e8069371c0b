// Token shards: round trips, every malformed-file error, and random bytes never read out of bounds.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "core/error.h"
#include "data/shard.h"
#include "tests/data/data_test_util.h"

namespace dt {
namespace {

using testing::read_bytes;
using testing::ScratchDir;
using testing::write_bytes;

std::vector<uint16_t> random_tokens(size_t n, uint32_t seed, int vocab = 50257) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(0, vocab - 1);
  std::vector<uint16_t> t(n);
  for (auto& x : t) x = static_cast<uint16_t>(dist(rng));
  return t;
}

// A shard built by hand, independently of write_shard: header ints then the raw payload.
std::string raw_shard(int32_t magic, int32_t version, int32_t n_tokens, const std::vector<uint16_t>& tokens) {
  std::vector<int32_t> header(256, 0);
  header[0] = magic, header[1] = version, header[2] = n_tokens;
  std::string s(reinterpret_cast<const char*>(header.data()), 1024);
  s.append(reinterpret_cast<const char*>(tokens.data()), tokens.size() * 2);
  return s;
}

// The message of the dt::Error that `f` throws ("" and a test failure when it does not throw).
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

TEST(Shard, RoundTripOddSizes) {
  ScratchDir dir;
  for (size_t n : {size_t{1}, size_t{7}, size_t{1023}, size_t{100003}}) {
    const auto tokens = random_tokens(n, static_cast<uint32_t>(n));
    const std::string path = dir / ("x_" + std::to_string(n) + ".bin");
    write_shard(path, tokens);
    // The bytes on disk are exactly the hand-built format.
    EXPECT_EQ(read_bytes(path), raw_shard(20240520, 1, static_cast<int32_t>(n), tokens));
    EXPECT_EQ(load_shard(path, 50257), tokens);
  }
}

TEST(Shard, WriteIsAtomicAndReplaces) {
  ScratchDir dir;
  const std::string path = dir / "a.bin";
  write_shard(path, random_tokens(100, 1));
  const auto second = random_tokens(37, 2);
  write_shard(path, second);
  EXPECT_EQ(load_shard(path, 50257), second);
  // No temporary file is left next to it.
  auto entries = testing::fs::directory_iterator(dir.str());
  EXPECT_EQ(std::distance(begin(entries), end(entries)), 1);
}

TEST(Shard, WriteErrors) {
  ScratchDir dir;
  EXPECT_NE(error_of([&] { write_shard(dir / "e.bin", {}); }).find("empty"), std::string::npos);
  const std::string msg = error_of([&] { write_shard(dir / "no/such/dir/x.bin", random_tokens(3, 3)); });
  EXPECT_NE(msg.find("no/such/dir/x.bin"), std::string::npos) << msg;
}

TEST(Shard, MissingFileAndDirectory) {
  ScratchDir dir;
  std::string msg = error_of([&] { load_shard(dir / "missing.bin", 50257); });
  EXPECT_NE(msg.find("missing.bin"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cannot open"), std::string::npos) << msg;
  msg = error_of([&] { load_shard(dir.str(), 50257); });
  EXPECT_NE(msg.find("is a directory"), std::string::npos) << msg;
}

struct BadCase {
  const char* what;
  std::string bytes;
  const char* expect;
};

TEST(Shard, MalformedFilesAreClearErrors) {
  ScratchDir dir;
  const auto t = random_tokens(50, 4);
  auto trunc = raw_shard(20240520, 1, 50, t);
  trunc.pop_back();
  std::vector<BadCase> cases = {
      {"too short for a header", std::string(1000, '\0'), "too short for the 1024-byte header"},
      {"zero bytes", "", "too short"},
      {"bad magic", raw_shard(12345, 1, 50, t), "bad magic number 12345"},
      {"bad version", raw_shard(20240520, 3, 50, t), "version 3 is not supported"},
      {"llm.c v2", raw_shard(20240520, 2, 50, t), "uint32 format"},
      {"empty", raw_shard(20240520, 1, 0, {}), "empty"},
      {"negative count", raw_shard(20240520, 1, -5, t), "negative"},
      {"truncated by a byte", trunc, "truncated"},
      {"header only", raw_shard(20240520, 1, 50, {}), "truncated"},
      {"huge count", raw_shard(20240520, 1, INT32_MAX, t), "truncated"},
      {"trailing bytes", raw_shard(20240520, 1, 49, t), "2 trailing bytes"},
      {"odd trailing byte", raw_shard(20240520, 1, 50, t) + "x", "1 trailing bytes"},
  };
  for (const auto& c : cases) {
    const std::string path = dir / "bad.bin";
    write_bytes(path, c.bytes);
    std::string msg = error_of([&] { load_shard(path, 50257); });
    EXPECT_NE(msg.find(c.expect), std::string::npos) << c.what << ": " << msg;
    EXPECT_NE(msg.find(path), std::string::npos) << c.what << ": the message must name the file: " << msg;
    // The in-memory parser agrees.
    std::string mem = error_of([&] {
      parse_shard(std::as_bytes(std::span<const char>(c.bytes.data(), c.bytes.size())), "mem", 50257);
    });
    EXPECT_NE(mem.find(c.expect), std::string::npos) << c.what << ": " << mem;
  }
}

TEST(Shard, TokenAtOrAboveVocabIsNamed) {
  ScratchDir dir;
  auto t = random_tokens(1000, 5, 50000);
  t[456] = 50257;
  t[700] = 60000;
  const std::string path = dir / "v.bin";
  write_shard(path, t);
  const std::string msg = error_of([&] { load_shard(path, 50257); });
  EXPECT_NE(msg.find("token 50257 at position 456 is >= vocab_size 50257"), std::string::npos) << msg;
  EXPECT_NE(msg.find("another tokenizer"), std::string::npos) << msg;
  // The largest id that fits passes; a larger vocab accepts everything.
  t[456] = 50256;
  t[700] = 0;
  write_shard(path, t);
  EXPECT_EQ(load_shard(path, 50257), t);
  t[700] = 65535;
  write_shard(path, t);
  EXPECT_EQ(load_shard(path, 65536), t);
  EXPECT_NE(error_of([&] { load_shard(path, 65535); }).find("token 65535 at position 700"), std::string::npos);
}

// Random bytes and random corruptions of a valid shard either parse or throw dt::Error; under
// -DDELTATRON_SANITIZE=ON an out-of-bounds read would abort here.
TEST(Shard, RandomBytesNeverCrash) {
  std::mt19937 rng(1234);
  const std::string valid = raw_shard(20240520, 1, 300, random_tokens(300, 6));
  int parsed = 0, rejected = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string bytes;
    if (iter % 2 == 0) {
      bytes.resize(rng() % 2000);
      for (auto& c : bytes) c = static_cast<char>(rng());
      if (bytes.size() >= 12 && iter % 4 == 0) {  // a valid magic and version reach the deeper checks
        std::memcpy(bytes.data(), valid.data(), 8);
      }
    } else if (iter % 10 == 1) {
      bytes = valid;  // some inputs must parse, or the test proves nothing
    } else {
      bytes = valid;
      for (int k = 0; k < 1 + static_cast<int>(rng() % 4); ++k) bytes[rng() % 12] = static_cast<char>(rng());
      bytes.resize(rng() % 3 == 0 ? rng() % (valid.size() + 10) : bytes.size());
    }
    try {
      auto t = parse_shard(std::as_bytes(std::span<const char>(bytes.data(), bytes.size())), "fuzz", 50257);
      EXPECT_EQ(bytes.size(), 1024 + 2 * t.size());
      ++parsed;
    } catch (const Error&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 0);
  EXPECT_GT(parsed, 0);
}

TEST(Shard, Stats) {
  std::vector<uint16_t> t = {50256, 10, 20, 50256, 5, 50256, 7};
  ShardStats s = shard_stats(t);
  EXPECT_EQ(s.n_tokens, 7);
  EXPECT_EQ(s.n_documents, 3);
  EXPECT_EQ(s.min_id, 5);
  EXPECT_EQ(s.max_id, 50256);
  EXPECT_TRUE(s.starts_with_eot);
  t[0] = 3;
  EXPECT_FALSE(shard_stats(t).starts_with_eot);
}

}  // namespace
}  // namespace dt

// ---- `deltatron info` ----
namespace dt {
namespace {

using testing::run_deltatron;

TEST(InfoCli, DescribesAValidShard) {
  ScratchDir dir;
  // Two documents: EOT "Hello" EOT " world" (GPT-2 ids 15496 and 995).
  write_shard(dir / "x_val_000000.bin", std::vector<uint16_t>{50256, 15496, 50256, 995});
  const auto r = run_deltatron("info '" + (dir / "x_val_000000.bin") + "'", dir.str());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("tokens:     4\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("documents:  2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("min 995, max 50256"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("validation"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"<|endoftext|>Hello<|endoftext|> world\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("valid:      yes"), std::string::npos) << r.out;
}

TEST(InfoCli, BadFilesExitOneWithAClearMessage) {
  ScratchDir dir;
  std::vector<uint16_t> t = {50256, 1, 2, 3};
  write_bytes(dir / "magic.bin", raw_shard(7, 1, 4, t));
  write_bytes(dir / "version.bin", raw_shard(20240520, 9, 4, t));
  write_bytes(dir / "trunc.bin", raw_shard(20240520, 1, 5, t));
  write_bytes(dir / "trail.bin", raw_shard(20240520, 1, 3, t));
  write_bytes(dir / "empty.bin", raw_shard(20240520, 1, 0, {}));
  write_bytes(dir / "vocab.bin", raw_shard(20240520, 1, 4, {50256, 1, 50300, 3}));
  write_bytes(dir / "ckpt.h5", std::string("\x89HDF\r\n\x1a\n", 8) + std::string(100, '\0'));
  write_bytes(dir / "tiny", "ab");
  struct Case {
    std::string file, expect;
  };
  for (const Case& c : {Case{"missing.bin", "no such file"}, Case{"magic.bin", "neither a token shard"},
                        Case{"tiny", "neither a token shard"}, Case{"version.bin", "version 9 is not supported"},
                        Case{"trunc.bin", "truncated"}, Case{"trail.bin", "trailing bytes"}, Case{"empty.bin", "empty"},
                        Case{"vocab.bin", "token 50300 at position 2 is >= vocab_size 50257"},
                        Case{"ckpt.h5", "not a Deltatron checkpoint"}, Case{".", "is a directory"}}) {
    const auto r = run_deltatron("info '" + (dir / c.file) + "'", dir.str());
    EXPECT_EQ(r.code, 1) << c.file << ": " << r.out;
    EXPECT_EQ(r.err.rfind("deltatron: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.file << ": " << r.err;
  }
  // A larger vocabulary accepts the id.
  const auto r = run_deltatron("info --vocab-size 50304 '" + (dir / "vocab.bin") + "'", dir.str());
  EXPECT_EQ(r.code, 0) << r.err;
}

}  // namespace
}  // namespace dt
