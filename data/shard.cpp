#include "data/shard.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace dt {

// The format is little-endian and we copy it straight into memory.
static_assert(std::endian::native == std::endian::little, "token shards assume a little-endian host");

namespace {

std::string errno_text() { return std::strerror(errno); }

// Closes a file descriptor on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

void write_all(int fd, const void* data, size_t bytes, const std::string& tmp) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::write(fd, p, std::min<size_t>(bytes, size_t{1} << 30));
    if (n < 0 && errno == EINTR) continue;
    DT_CHECK(n > 0, "cannot write {}: {}", tmp, errno_text());
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

// Reads exactly `bytes` bytes; returns false on a short file.
bool read_all(int fd, void* data, size_t bytes, const std::string& path) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    ssize_t n = ::read(fd, p, std::min<size_t>(bytes, size_t{1} << 30));
    if (n < 0 && errno == EINTR) continue;
    DT_CHECK(n >= 0, "shard {}: read failed: {}", path, errno_text());
    if (n == 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

void write_shard(const std::string& path, std::span<const uint16_t> tokens) {
  DT_CHECK(!tokens.empty(), "shard {}: refusing to write an empty shard (no tokens)", path);
  DT_CHECK(tokens.size() <= static_cast<size_t>(INT32_MAX),
           "shard {}: {} tokens do not fit the int32 token count of the header; write smaller shards",
           path, tokens.size());
  int32_t header[kShardHeaderInts] = {};
  header[0] = kShardMagic;
  header[1] = kShardVersion;
  header[2] = static_cast<int32_t>(tokens.size());

  std::string tmp = path + ".tmp.XXXXXX";
  Fd f;
  f.fd = ::mkstemp(tmp.data());
  DT_CHECK(f.fd >= 0, "cannot create shard {}: {}; check that the directory exists and is writable", path,
           errno_text());
  try {
    write_all(f.fd, header, sizeof(header), tmp);
    write_all(f.fd, tokens.data(), tokens.size_bytes(), tmp);
    DT_CHECK(::fsync(f.fd) == 0, "cannot flush {}: {}", tmp, errno_text());
    // mkstemp makes the file 0600; shards are ordinary data files.
    ::fchmod(f.fd, 0644);
    int fd = f.fd;
    f.fd = -1;
    DT_CHECK(::close(fd) == 0, "cannot close {}: {}", tmp, errno_text());
    DT_CHECK(::rename(tmp.c_str(), path.c_str()) == 0, "cannot rename {} to {}: {}", tmp, path, errno_text());
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  // Make the rename itself durable (best effort: some file systems refuse fsync on directories).
  std::string dir = std::filesystem::path(path).parent_path().string();
  Fd d;
  d.fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (d.fd >= 0) ::fsync(d.fd);
}

int64_t shard_checked_token_count(std::span<const std::byte> header, uint64_t file_bytes, const std::string& name) {
  DT_ASSERT(header.size() >= kShardHeaderBytes);
  int32_t h[3];
  std::memcpy(h, header.data(), sizeof(h));
  DT_CHECK(h[0] == kShardMagic,
           "shard {}: bad magic number {} (expected {}); this is not a token shard in llm.c's format", name, h[0],
           kShardMagic);
  DT_CHECK(h[1] == kShardVersion, "shard {}: version {} is not supported (expected {}: uint16 GPT-2 token ids){}",
           name, h[1], kShardVersion, h[1] == 2 ? "; version 2 is llm.c's uint32 format for Llama 3 tokens" : "");
  const int64_t n = h[2];
  DT_CHECK(n >= 0, "shard {}: the header's token count is negative ({}); the file is corrupt", name, n);
  DT_CHECK(n > 0, "shard {}: empty (the header says 0 tokens); re-create it with `deltatron prepare`", name);
  const uint64_t expected = kShardHeaderBytes + 2 * static_cast<uint64_t>(n);
  DT_CHECK(file_bytes >= expected,
           "shard {}: truncated: the header says {} tokens ({} bytes with the header) but the file has {} bytes; "
           "was a copy or download interrupted? Re-create or re-download it",
           name, n, expected, file_bytes);
  DT_CHECK(file_bytes == expected,
           "shard {}: {} trailing bytes after the {} tokens the header announces ({} bytes expected, the file has "
           "{}); the file is corrupt or its header is wrong",
           name, file_bytes - expected, n, expected, file_bytes);
  return n;
}

void shard_check_ids(std::span<const uint16_t> tokens, int vocab_size, const std::string& name,
                     int64_t first_position) {
  DT_CHECK(vocab_size > 0, "shard {}: vocab_size must be positive, got {}", name, vocab_size);
  if (vocab_size > 65535) return;  // every uint16 id fits
  const uint16_t limit = static_cast<uint16_t>(vocab_size);
  // A branch-free max first: the common (valid) case is one pass without early exits.
  uint16_t max_id = 0;
  for (uint16_t id : tokens) max_id = std::max(max_id, id);
  if (max_id < limit) return;
  auto bad = std::find_if(tokens.begin(), tokens.end(), [&](uint16_t id) { return id >= limit; });
  DT_FAIL("shard {}: token {} at position {} is >= vocab_size {}; was this shard made with another tokenizer? "
          "Re-create it with `deltatron prepare` and the model's tokenizer, or raise model.vocab_size",
          name, *bad, first_position + (bad - tokens.begin()), vocab_size);
}

std::vector<uint16_t> parse_shard(std::span<const std::byte> bytes, const std::string& name, int vocab_size) {
  DT_CHECK(bytes.size() >= kShardHeaderBytes,
           "shard {}: {} bytes, too short for the {}-byte header; the file is truncated or not a token shard", name,
           bytes.size(), kShardHeaderBytes);
  const int64_t n = shard_checked_token_count(bytes.first(kShardHeaderBytes), bytes.size(), name);
  std::vector<uint16_t> tokens(static_cast<size_t>(n));
  std::memcpy(tokens.data(), bytes.data() + kShardHeaderBytes, tokens.size() * sizeof(uint16_t));
  shard_check_ids(tokens, vocab_size, name);
  return tokens;
}

ShardFile::ShardFile(const std::string& path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  DT_CHECK(fd_ >= 0, "shard {}: cannot open: {}", path, errno_text());
  Fd owner{fd_};  // closes the descriptor if a check below throws
  struct stat st;
  DT_CHECK(::fstat(fd_, &st) == 0, "shard {}: cannot stat: {}", path, errno_text());
  DT_CHECK(!S_ISDIR(st.st_mode), "shard {}: is a directory; pass the shard files (e.g. '{}/*_train_*.bin')", path,
           path);
  DT_CHECK(S_ISREG(st.st_mode), "shard {}: not a regular file", path);
  bytes_ = static_cast<uint64_t>(st.st_size);
  DT_CHECK(bytes_ >= kShardHeaderBytes,
           "shard {}: {} bytes, too short for the {}-byte header; the file is truncated or not a token shard", path,
           bytes_, kShardHeaderBytes);
  owner.fd = -1;
}

ShardFile::~ShardFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::vector<uint16_t> load_shard(const std::string& path, int vocab_size) {
  ShardFile f(path);
  std::byte header[kShardHeaderBytes];
  DT_CHECK(read_all(f.fd(), header, sizeof(header), path), "shard {}: the file shrank while being read", path);
  // Only after the header agrees with the file size do we allocate what it announces.
  const int64_t n = shard_checked_token_count(header, f.bytes(), path);
  std::vector<uint16_t> tokens(static_cast<size_t>(n));
  DT_CHECK(read_all(f.fd(), tokens.data(), tokens.size() * sizeof(uint16_t), path),
           "shard {}: the file shrank while being read", path);
  shard_check_ids(tokens, vocab_size, path);
  return tokens;
}

ShardStats shard_stats(std::span<const uint16_t> tokens) {
  ShardStats s;
  s.n_tokens = static_cast<int64_t>(tokens.size());
  if (tokens.empty()) return s;
  s.min_id = 65535;
  for (uint16_t id : tokens) {
    s.min_id = std::min(s.min_id, id);
    s.max_id = std::max(s.max_id, id);
    s.n_documents += id == kShardEot;
  }
  s.starts_with_eot = tokens.front() == kShardEot;
  return s;
}

}  // namespace dt
