#include "core/sha256.h"

#include <openssl/evp.h>

#include "core/error.h"

namespace dt {

std::string sha256_hex(const void* data, size_t bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  DT_CHECK(EVP_Digest(data, bytes, digest, &len, EVP_sha256(), nullptr) == 1, "SHA-256 failed");
  static const char* hex = "0123456789abcdef";
  std::string out(2 * len, '0');
  for (unsigned i = 0; i < len; ++i) {
    out[2 * i] = hex[digest[i] >> 4];
    out[2 * i + 1] = hex[digest[i] & 15];
  }
  return out;
}

}  // namespace dt
