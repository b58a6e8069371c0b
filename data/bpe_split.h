// GPT-2 pre-tokenisation: splits text into the pieces that BPE then encodes one by one.
// It is a hand-written matcher for tiktoken's r50k/gpt2 pattern
//   '(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s
// (the same split as GPT-2's original `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+|
// ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`), with leftmost-first alternation as in a backtracking
// regex engine. Python equivalent: `regex.findall(pat, text)`.
#pragma once

#include <cstddef>
#include <string_view>

#include "data/unicode_class.h"

namespace dt {

class PieceSplitter {
 public:
  explicit PieceSplitter(std::string_view text)
      : p_(reinterpret_cast<const uint8_t*>(text.data())), end_(p_ + text.size()),
        classes_(detail::bmp_class_table()) {}

  // The next piece, or false at the end of the text. Pieces tile the text exactly.
  bool next(std::string_view& piece) {
    if (p_ == end_) return false;
    const uint8_t* start = p_;
    p_ = piece_end(start);
    piece = {reinterpret_cast<const char*>(start), static_cast<size_t>(p_ - start)};
    return true;
  }

 private:
  Utf8Char char_at(const uint8_t* p) const {
    if (*p < 0x80) return {classes_[*p], 1};
    return detail::decode_utf8_slow(p, end_);
  }

  // End of the run of characters of class `cls` starting at p.
  const uint8_t* run_end(const uint8_t* p, CharClass cls) const {
    while (p < end_) {
      const Utf8Char c = char_at(p);
      if (c.cls != cls) break;
      p += c.len;
    }
    return p;
  }

  const uint8_t* piece_end(const uint8_t* p) const;

  const uint8_t* p_;
  const uint8_t* end_;
  const CharClass* classes_;  // class of each code point < 0x10000
};

}  // namespace dt
