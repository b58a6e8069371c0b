// SHA-256 as lowercase hex (OpenSSL's libcrypto does the work): of a byte range, of a
// stream of updates, or of a file's bytes from an offset to its end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace dt {

std::string sha256_hex(const void* data, size_t bytes);

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, size_t bytes);
  std::string hex();  // finishes the digest

 private:
  void* ctx_;  // EVP_MD_CTX
};

// SHA-256 of the bytes of `path` from `offset` to the end; throws if the file cannot be read.
std::string sha256_file_hex(const std::string& path, uint64_t offset = 0);

}  // namespace dt
