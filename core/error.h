// Errors. Every failure is a dt::Error carrying what went wrong and where
// (the source location, plus whatever file/key/tensor the message names).
// The `deltatron` command prints it as `deltatron: error: <what>` and exits 1.
#pragma once

#include <fmt/format.h>

#include <source_location>
#include <stdexcept>
#include <string>

namespace dt {

class Error : public std::runtime_error {
 public:
  Error(std::string what, std::source_location where = std::source_location::current())
      : std::runtime_error(std::move(what)), file_(where.file_name()), line_(where.line()) {}
  const char* file() const { return file_; }
  unsigned line() const { return line_; }

 private:
  const char* file_;
  unsigned line_;
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
