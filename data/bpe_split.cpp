#include "data/bpe_split.h"

namespace dt {

const uint8_t* PieceSplitter::piece_end(const uint8_t* p) const {
  const ptrdiff_t left = end_ - p;
  // '(?:[sdmt]|ll|ve|re)  -- ASCII apostrophe, lower case only, as in GPT-2.
  if (*p == '\'' && left >= 2) {
    const uint8_t a = p[1];
    if (a == 's' || a == 'd' || a == 'm' || a == 't') return p + 2;
    if (left >= 3) {
      const uint8_t b = p[2];
      if ((a == 'l' && b == 'l') || (a == 'v' && b == 'e') || (a == 'r' && b == 'e')) return p + 3;
    }
  }
  Utf8Char c = char_at(p);
  // ` ?\p{L}++`, ` ?\p{N}++`, ` ?[^\s\p{L}\p{N}]++`: an optional U+0020, then a maximal run
  // of one class. A space followed by a non-space character joins that character's run.
  if (*p == ' ' && left >= 2) {
    const Utf8Char c1 = char_at(p + 1);
    if (c1.cls != CharClass::kSpace) return run_end(p + 1 + c1.len, c1.cls);
  }
  if (c.cls != CharClass::kSpace) return run_end(p + c.len, c.cls);
  // Whitespace. `\s++$`: a run reaching the end of the text is one piece. `\s+(?!\S)`:
  // otherwise a run of n >= 2 characters gives its first n-1 (the last one then starts the
  // next piece, e.g. as the optional space of " word"). `\s`: a lone one is a piece by itself.
  const uint8_t* last = p;  // start of the last whitespace character seen
  const uint8_t* q = p + c.len;
  while (q < end_) {
    c = char_at(q);
    if (c.cls != CharClass::kSpace) break;
    last = q;
    q += c.len;
  }
  if (q == end_) return q;
  return last == p ? q : last;
}

}  // namespace dt
