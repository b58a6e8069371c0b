#include "data/unicode_class.h"

#include <unicode/uchar.h>

#include <memory>

namespace dt {

namespace {

CharClass icu_class(uint32_t cp) {
  const auto c = static_cast<UChar32>(cp);
  if (u_isUWhiteSpace(c)) return CharClass::kSpace;
  switch (u_charType(c)) {
    case U_UPPERCASE_LETTER:
    case U_LOWERCASE_LETTER:
    case U_TITLECASE_LETTER:
    case U_MODIFIER_LETTER:
    case U_OTHER_LETTER:
      return CharClass::kLetter;
    case U_DECIMAL_DIGIT_NUMBER:
    case U_LETTER_NUMBER:
    case U_OTHER_NUMBER:
      return CharClass::kNumber;
    default:
      return CharClass::kOther;
  }
}

bool is_cont(uint8_t b) { return (b & 0xC0) == 0x80; }

}  // namespace

namespace detail {

const CharClass* bmp_class_table() {
  // Function-local static: built once, thread-safe, immutable afterwards.
  static const std::unique_ptr<CharClass[]> table = [] {
    auto t = std::make_unique<CharClass[]>(0x10000);
    for (uint32_t cp = 0; cp < 0x10000; ++cp) t[cp] = icu_class(cp);
    return t;
  }();
  return table.get();
}

Utf8Char decode_utf8_slow(const uint8_t* p, const uint8_t* end) {
  constexpr Utf8Char kInvalid{CharClass::kOther, 1};
  const uint8_t b0 = p[0];
  const ptrdiff_t left = end - p;
  if (b0 < 0x80) return {bmp_class_table()[b0], 1};
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    if (left < 2 || !is_cont(p[1])) return kInvalid;
    return {bmp_class_table()[((b0 & 0x1Fu) << 6) | (p[1] & 0x3Fu)], 2};
  }
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    if (left < 3 || !is_cont(p[1]) || !is_cont(p[2])) return kInvalid;
    if (b0 == 0xE0 && p[1] < 0xA0) return kInvalid;  // overlong
    if (b0 == 0xED && p[1] > 0x9F) return kInvalid;  // UTF-16 surrogate
    const uint32_t cp = ((b0 & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
    return {bmp_class_table()[cp], 3};
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    if (left < 4 || !is_cont(p[1]) || !is_cont(p[2]) || !is_cont(p[3])) return kInvalid;
    if (b0 == 0xF0 && p[1] < 0x90) return kInvalid;  // overlong
    if (b0 == 0xF4 && p[1] > 0x8F) return kInvalid;  // above U+10FFFF
    const uint32_t cp = ((b0 & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) |
                        (p[3] & 0x3Fu);
    return {icu_class(cp), 4};
  }
  return kInvalid;  // continuation byte, C0/C1 (overlong lead) or F5..FF
}

}  // namespace detail

CharClass char_class(uint32_t cp) {
  if (cp < 0x10000) return detail::bmp_class_table()[cp];
  if (cp > 0x10FFFF) return CharClass::kOther;
  return icu_class(cp);
}

}  // namespace dt
