// Byte-pair merging of one piece, exactly as tiktoken's `byte_pair_merge`: start from one
// token per byte; repeatedly merge the adjacent pair of lowest rank (the leftmost one on a
// tie) while any adjacent pair concatenates to a token.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "data/bpe_index.h"

namespace dt {

// Appends the token ids of `piece` (at least one byte) to `out`. byte_ids[b] is the id of the
// one-byte token b. Pieces up to kBpeSmallPiece bytes use the quadratic scan on the stack;
// longer ones a heap, O(n log n), so a megabyte without spaces stays fast.
inline constexpr size_t kBpeSmallPiece = 128;
void bpe_merge(std::string_view piece, const int32_t* byte_ids, const PairIndex& pairs,
               std::vector<int32_t>& out);

// The quadratic version for any length (the test compares the two on long pieces).
void bpe_merge_scan(std::string_view piece, const int32_t* byte_ids, const PairIndex& pairs,
                    std::vector<int32_t>& out);

}  // namespace dt
