// SHA-256 of a byte range, as lowercase hex (OpenSSL's libcrypto does the work).
#pragma once

#include <cstddef>
#include <string>

namespace dt {

std::string sha256_hex(const void* data, size_t bytes);

}  // namespace dt
