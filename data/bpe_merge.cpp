#include "data/bpe_merge.h"

#include <algorithm>
#include <climits>
#include <queue>

namespace dt {

namespace {

// ids[0..n) the current tokens, rank[i] the merged id of (ids[i], ids[i+1]) or INT_MAX.
// Since a GPT-2 token's rank is its id, the lowest rank is the lowest merged id.
// Returns the number of tokens left.
size_t merge_scan(int32_t* ids, int32_t* rank, size_t n, const PairIndex& pairs) {
  auto pair_rank = [&](size_t i) {
    const int32_t m = pairs.find(ids[i], ids[i + 1]);
    return m < 0 ? INT_MAX : m;
  };
  for (size_t i = 0; i + 1 < n; ++i) rank[i] = pair_rank(i);
  while (n > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; ++i)
      if (rank[i] < rank[best]) best = i;  // strict: the leftmost of equal ranks wins
    if (rank[best] == INT_MAX) break;
    ids[best] = rank[best];
    // Drop token best+1 and the pair (best+1, best+2); the pairs around `best` change.
    std::copy(ids + best + 2, ids + n, ids + best + 1);
    if (best + 2 < n) std::copy(rank + best + 2, rank + n - 1, rank + best + 1);
    --n;
    if (best + 1 < n) rank[best] = pair_rank(best);
    if (best > 0) rank[best - 1] = pair_rank(best - 1);
  }
  return n;
}

// The same merge order with a min-heap of (rank, position) over a linked list of tokens.
// Position order equals list order, so (rank, position) picks the leftmost lowest pair, as the
// scan does. Stale heap entries are skipped by re-checking the pair when popped.
void merge_heap(std::string_view piece, const int32_t* byte_ids, const PairIndex& pairs,
                std::vector<int32_t>& out) {
  const size_t n = piece.size();
  std::vector<int32_t> ids(n), prev(n), next(n);
  struct Entry {
    int32_t rank;
    int32_t pos;  // index of the left token (its first byte)
    int32_t left, right;
    bool operator>(const Entry& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
  for (size_t i = 0; i < n; ++i) {
    ids[i] = byte_ids[static_cast<uint8_t>(piece[i])];
    prev[i] = static_cast<int32_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
  }
  auto push = [&](int32_t i) {
    if (i < 0 || next[i] < 0) return;
    const int32_t m = pairs.find(ids[i], ids[next[i]]);
    if (m >= 0) heap.push({m, i, ids[i], ids[next[i]]});
  };
  for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int32_t>(i));
  while (!heap.empty()) {
    const Entry e = heap.top();
    heap.pop();
    const int32_t i = e.pos, j = next[i];
    if (ids[i] != e.left || j < 0 || ids[j] != e.right) continue;  // stale
    ids[i] = e.rank;
    ids[j] = -1;  // removed
    next[i] = next[j];
    if (next[j] >= 0) prev[next[j]] = i;
    push(prev[i]);
    push(i);
  }
  for (int32_t i = 0; i >= 0; i = next[i]) out.push_back(ids[i]);
}

}  // namespace

void bpe_merge_scan(std::string_view piece, const int32_t* byte_ids, const PairIndex& pairs,
                    std::vector<int32_t>& out) {
  const size_t n = piece.size();
  std::vector<int32_t> ids(n), rank(n);
  for (size_t i = 0; i < n; ++i) ids[i] = byte_ids[static_cast<uint8_t>(piece[i])];
  const size_t m = merge_scan(ids.data(), rank.data(), n, pairs);
  out.insert(out.end(), ids.begin(), ids.begin() + m);
}

void bpe_merge(std::string_view piece, const int32_t* byte_ids, const PairIndex& pairs,
               std::vector<int32_t>& out) {
  const size_t n = piece.size();
  if (n > kBpeSmallPiece) {
    merge_heap(piece, byte_ids, pairs, out);
    return;
  }
  int32_t ids[kBpeSmallPiece], rank[kBpeSmallPiece];
  for (size_t i = 0; i < n; ++i) ids[i] = byte_ids[static_cast<uint8_t>(piece[i])];
  const size_t m = merge_scan(ids, rank, n, pairs);
  out.insert(out.end(), ids, ids + m);
}

}  // namespace dt
