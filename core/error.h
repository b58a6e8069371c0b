// Errors. Every failure is a dt::Error carrying what went wrong and where
// (the file, key or tensor at fault; internal checks add the source line).
// The `deltatron` command prints it as `deltatron: error: <what>` and exits 1.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace dt {

// The message names the input at fault (file, key, tensor); DT_ASSERT adds the source line.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace dt

// DT_CHECK(cond, "format {}", args...): throw dt::Error with the message when cond is false.
// Use it for user-facing checks: the message must say what is wrong, where, and how to fix it.
#define DT_CHECK(cond, ...)                                  \
  do {                                                       \
    if (!(cond)) [[unlikely]] {                              \
      throw ::dt::Error(::fmt::format(__VA_ARGS__));         \
    }                                                        \
  } while (0)

// DT_FAIL("format {}", args...): throw unconditionally.
#define DT_FAIL(...) throw ::dt::Error(::fmt::format(__VA_ARGS__))

// DT_ASSERT(cond): an internal invariant; the message names the condition and source line.
#define DT_ASSERT(cond)                                                                    \
  do {                                                                                     \
    if (!(cond)) [[unlikely]] {                                                            \
      throw ::dt::Error(::fmt::format("internal error: {} failed at {}:{}", #cond,        \
                                      __FILE__, __LINE__));                                \
    }                                                                                      \
  } while (0)
