#include "data/mapped_shard.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <span>
#include <utility>

#include "core/error.h"
#include "data/shard.h"

namespace dt {

MappedShard::MappedShard(const std::string& path, Access access) : path_(path) {
  ShardFile file(path);  // the descriptor may close once mapped: the mapping keeps the file
  bytes_ = static_cast<size_t>(file.bytes());
  void* base = ::mmap(nullptr, bytes_, PROT_READ, MAP_SHARED, file.fd(), 0);
  DT_CHECK(base != MAP_FAILED, "shard {}: cannot map its {} bytes into memory: {}; check the file and ulimit -v",
           path, bytes_, std::strerror(errno));
  base_ = base;
  try {
    std::span<const std::byte> header(static_cast<const std::byte*>(base_), kShardHeaderBytes);
    n_tokens_ = shard_checked_token_count(header, file.bytes(), path);
  } catch (...) {
    unmap();
    throw;
  }
  tokens_ = reinterpret_cast<const uint16_t*>(static_cast<const std::byte*>(base_) + kShardHeaderBytes);
  // A hint only; a kernel that ignores it reads the same bytes.
  ::madvise(base_, bytes_, access == Access::kRandom ? MADV_RANDOM : MADV_SEQUENTIAL);
}

MappedShard::~MappedShard() { unmap(); }

MappedShard::MappedShard(MappedShard&& other) noexcept
    : path_(std::move(other.path_)),
      base_(std::exchange(other.base_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      tokens_(std::exchange(other.tokens_, nullptr)),
      n_tokens_(std::exchange(other.n_tokens_, 0)) {}

MappedShard& MappedShard::operator=(MappedShard&& other) noexcept {
  if (this != &other) {
    unmap();
    path_ = std::move(other.path_);
    base_ = std::exchange(other.base_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    tokens_ = std::exchange(other.tokens_, nullptr);
    n_tokens_ = std::exchange(other.n_tokens_, 0);
  }
  return *this;
}

void MappedShard::unmap() {
  if (base_) ::munmap(base_, bytes_);
  base_ = nullptr;
  bytes_ = 0;
}

}  // namespace dt
