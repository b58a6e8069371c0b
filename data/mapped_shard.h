// A token shard (data/shard.h) mapped read-only into memory with POSIX mmap. Opening checks the
// header against the file size and nothing more: token pages are read from disk only when touched,
// so a process holds in memory the pages of the windows it reads, not the shard. Those pages are
// the kernel's page cache (clean, shared between processes mapping the same file, reclaimable);
// the mapping is removed with the object.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace dt {

class MappedShard {
 public:
  // How the tokens will be read: a hint to the kernel's read-ahead (madvise).
  enum class Access { kRandom, kSequential };

  // Maps the shard at `path`; errors name the file (those of ShardFile and of the header check).
  MappedShard(const std::string& path, Access access);
  ~MappedShard();
  MappedShard(MappedShard&& other) noexcept;
  MappedShard& operator=(MappedShard&& other) noexcept;
  MappedShard(const MappedShard&) = delete;
  MappedShard& operator=(const MappedShard&) = delete;

  // The token ids, unchecked against any vocabulary (callers check what they read).
  std::span<const uint16_t> tokens() const { return {tokens_, static_cast<size_t>(n_tokens_)}; }
  int64_t size() const { return n_tokens_; }
  const std::string& path() const { return path_; }

 private:
  void unmap();

  std::string path_;
  void* base_ = nullptr;  // the whole file, header included
  size_t bytes_ = 0;
  const uint16_t* tokens_ = nullptr;
  int64_t n_tokens_ = 0;
};

}  // namespace dt
