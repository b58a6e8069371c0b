// UTF-8 decoding and the three Unicode classes the GPT-2 pre-tokenisation regex
// distinguishes: \p{L} (letters), \p{N} (numbers), \s (White_Space), and the rest.
//
// Classes come from ICU: u_charType (general category) and u_isUWhiteSpace, which is
// the Unicode White_Space property, the same set Rust's regex crate (and so tiktoken)
// uses for \s. Note Python's str.isspace differs: it also counts U+001C..U+001F.
// Unicode versions: tiktoken 0.14's regex tables are Unicode 16.0; Debian 12's ICU 72 is 15.0.
// So characters first assigned in Unicode 15.1 or 16.0 (CJK extension I, Garay, Kirat Rai, ...)
// are letters/numbers to tiktoken but kOther here, until the build uses ICU >= 76.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dt {

enum class CharClass : uint8_t {
  kOther = 0,  // [^\s\p{L}\p{N}], and every byte that is not valid UTF-8
  kLetter,     // \p{L}: Lu Ll Lt Lm Lo
  kNumber,     // \p{N}: Nd Nl No
  kSpace,      // \s: White_Space
};

// One decoded character: its class and how many bytes it spans (1..4).
struct Utf8Char {
  CharClass cls;
  uint8_t len;
};

// Class of a code point (0..0x10FFFF). Thread-safe.
CharClass char_class(uint32_t cp);

namespace detail {
// Classes of U+0000..U+FFFF, filled once from ICU (64 KiB).
const CharClass* bmp_class_table();
// Decodes the character at p (p < end; the caller handles ASCII through the table). Strict
// UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF): an invalid or truncated sequence
// yields one byte of class kOther, so any byte string splits into characters and
// decode(encode(s)) == s holds.
Utf8Char decode_utf8_slow(const uint8_t* p, const uint8_t* end);
}  // namespace detail

}  // namespace dt
