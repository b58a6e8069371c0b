#include "core/sha256.h"

#include <openssl/evp.h>

#include <cstdio>
#include <vector>

#include "core/error.h"

namespace dt {

namespace {

std::string to_hex(const unsigned char* digest, unsigned len) {
  static const char* hex = "0123456789abcdef";
  std::string out(2 * len, '0');
  for (unsigned i = 0; i < len; ++i) {
    out[2 * i] = hex[digest[i] >> 4];
    out[2 * i + 1] = hex[digest[i] & 15];
  }
  return out;
}

}  // namespace

std::string sha256_hex(const void* data, size_t bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  DT_CHECK(EVP_Digest(data, bytes, digest, &len, EVP_sha256(), nullptr) == 1, "SHA-256 failed");
  return to_hex(digest, len);
}

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  DT_CHECK(ctx_ && EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr) == 1,
           "SHA-256 init failed");
}

Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

void Sha256::update(const void* data, size_t bytes) {
  DT_CHECK(EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), data, bytes) == 1, "SHA-256 update failed");
}

std::string Sha256::hex() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  DT_CHECK(EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), digest, &len) == 1, "SHA-256 final failed");
  return to_hex(digest, len);
}

std::string sha256_file_hex(const std::string& path, uint64_t offset) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  DT_CHECK(f != nullptr, "cannot open {} to checksum it", path);
  Sha256 h;
  std::vector<char> buf(1 << 20);
  bool ok = std::fseek(f, static_cast<long>(offset), SEEK_SET) == 0;
  while (ok) {
    size_t n = std::fread(buf.data(), 1, buf.size(), f);
    if (n) h.update(buf.data(), n);
    if (n < buf.size()) {
      ok = !std::ferror(f);
      break;
    }
  }
  std::fclose(f);
  DT_CHECK(ok, "reading {} failed while checksumming it", path);
  return h.hex();
}

}  // namespace dt
