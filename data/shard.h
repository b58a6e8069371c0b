// Token shards in llm.c's format (docs/inputs.md, "Token shards"), so existing FineWeb /
// FineWeb-Edu shards work:
//   a header of 256 little-endian int32: [0] = 20240520 (magic), [1] = 1 (version), [2] = n_tokens,
//   then n_tokens little-endian uint16 token ids. Every document starts with <|endoftext|> (50256).
// By convention the validation shard's name contains `_val_` and train shards `_train_`.
//
// The reader trusts nothing in the file: the header is checked against the file size before a single
// token is touched, so random bytes (a fuzzer) give a dt::Error, never an out-of-bounds read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace dt {

inline constexpr int32_t kShardMagic = 20240520;
inline constexpr int32_t kShardVersion = 1;
inline constexpr int kShardHeaderInts = 256;
inline constexpr size_t kShardHeaderBytes = kShardHeaderInts * sizeof(int32_t);  // 1024
inline constexpr int32_t kShardEot = 50256;  // GPT-2 <|endoftext|>, the document separator

// Writes `tokens` as a shard at `path`, atomically: a temporary file in the same directory is
// written, fsync'ed and renamed over `path`, so a crash never leaves a half-written shard behind.
// An empty shard or more than INT32_MAX tokens is refused (the header counts tokens in an int32).
void write_shard(const std::string& path, std::span<const uint16_t> tokens);

// Checks a shard held in memory (`name` is used in messages only) and returns its tokens.
// `vocab_size` is the model's vocabulary: every id must be below it. This is the entry point for
// fuzzing: any byte string either parses or throws dt::Error naming the problem.
std::vector<uint16_t> parse_shard(std::span<const std::byte> bytes, const std::string& name, int vocab_size);

// Reads and checks the shard at `path` (one read of the whole file) and returns its tokens; the
// data loader maps shards instead (data/mapped_shard.h) and checks ids as it reads windows.
// Errors name the file and the problem: cannot open, bad magic, bad version, truncated, trailing
// bytes, empty, a token id >= vocab_size.
std::vector<uint16_t> load_shard(const std::string& path, int vocab_size);

// Token count from a header, checked against the size of the file it came from; throws on any
// inconsistency. `header` must hold at least kShardHeaderBytes bytes (callers check the size first).
int64_t shard_checked_token_count(std::span<const std::byte> header, uint64_t file_bytes, const std::string& name);

// Throws when some id is >= vocab_size, naming the first such token and its position in the shard:
// `first_position` is the shard offset of tokens[0] (a window checked on its own passes its start).
void shard_check_ids(std::span<const uint16_t> tokens, int vocab_size, const std::string& name,
                     int64_t first_position = 0);

// A shard file opened for reading: a regular file at least a header long (errors name the file:
// cannot open, a directory, not a regular file, too short). The descriptor closes with the object.
class ShardFile {
 public:
  explicit ShardFile(const std::string& path);
  ~ShardFile();
  ShardFile(const ShardFile&) = delete;
  ShardFile& operator=(const ShardFile&) = delete;
  int fd() const { return fd_; }
  uint64_t bytes() const { return bytes_; }

 private:
  int fd_ = -1;
  uint64_t bytes_ = 0;
};

// What `deltatron info` prints about a shard.
struct ShardStats {
  int64_t n_tokens = 0;
  int64_t n_documents = 0;  // number of EOT tokens
  uint16_t min_id = 0;
  uint16_t max_id = 0;
  bool starts_with_eot = false;
};
ShardStats shard_stats(std::span<const uint16_t> tokens);

}  // namespace dt
