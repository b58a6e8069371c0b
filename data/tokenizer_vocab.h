// The loaded vocabulary behind a Tokenizer (private to data/tokenizer*.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/bpe_index.h"
#include "data/tokenizer.h"

namespace dt {

struct Tokenizer::Vocab {
  Vocab() = default;
  Vocab(const Vocab&) = delete;  // `tokens` points into `bytes`: a copy would dangle
  Vocab& operator=(const Vocab&) = delete;

  uint64_t serial = 0;            // unique per load; keys the per-thread piece caches
  std::string bytes;              // token i is bytes[offsets[i], offsets[i+1])
  std::vector<uint32_t> offsets;  // vocab_size + 1 entries
  int32_t byte_ids[256] = {};     // id of the one-byte token b
  TokenIndex tokens;              // bytes -> id (without <|endoftext|>)
  PairIndex pairs;                // (left, right) -> id of left+right

  int32_t size() const { return static_cast<int32_t>(offsets.size()) - 1; }
};

}  // namespace dt
