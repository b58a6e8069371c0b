// The training / evaluation data loader over token shards (data/shard.h).
//
// Windows of T+1 tokens start every T tokens in each shard (a window never crosses shards), so
// shard s with n_s tokens gives floor((n_s - 1) / T) windows; the windows of all shards, in file
// order, are numbered 0..W-1. A global batch is B * dp_size windows taken from consecutive positions
// of the epoch's order; rank r takes positions p + r, p + r + dp_size, ... (so the ranks' windows are
// disjoint and together cover the epoch). An epoch ends when fewer than B * dp_size positions are left;
// those few windows are skipped in that epoch (with shuffling, different ones each epoch).
//   train (shuffle = true): the order of epoch e is a Philox-based permutation of 0..W-1, a
//     deterministic function of (seed, e) only, so every rank computes the same one.
//   eval (shuffle = false): file order, so evaluation is reproducible.
// The cursor is the same on every rank (the global position), so one saved cursor restores all ranks.
//
// The shards are mapped, not read (data/mapped_shard.h): opening checks each header and counts the
// windows, and a rank touches only the pages of the windows it reads, so its memory does not grow
// with the data. Token ids are checked (< vocab_size) in each window as it is read: a bad id is an
// error at the first next() whose batch holds it, naming the shard and the token's offset, not an
// error of the constructor.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/mapped_shard.h"

namespace dt {

struct LoaderCursor {
  uint64_t epoch = 0;
  uint64_t position = 0;  // index into the epoch's window order where the next global batch starts
  bool operator==(const LoaderCursor&) const = default;
};

class DataLoader {
 public:
  // Maps the shards and checks their headers and sizes (every shard holds a window; the windows
  // make at least one global batch). Ids are checked later, window by window, by next().
  DataLoader(std::vector<std::string> shard_paths, int B, int T, int vocab_size, uint64_t seed, bool shuffle,
             int dp_rank = 0, int dp_size = 1);

  // Fills inputs[B*T] = window[0..T) and targets[B*T] = window[1..T] (int32) for this rank's B
  // windows of the next global batch; moves to the next epoch when this one is used up. Throws,
  // naming the shard and the offset, when a window holds an id >= vocab_size.
  void next(int32_t* inputs, int32_t* targets);

  LoaderCursor cursor() const { return cursor_; }
  void restore(const LoaderCursor& cursor);  // continues the exact stream saved by cursor()
  void reset() { restore(LoaderCursor{}); }

  int64_t windows_per_epoch() const;  // windows per rank per epoch
  int64_t batches_per_epoch() const;  // calls to next() per epoch
  int64_t tokens_in_shards() const { return tokens_in_shards_; }
  int64_t windows_in_shards() const { return static_cast<int64_t>(n_windows_); }

  // The global index (0..W-1, file order) of the window at `position` of epoch `epoch`'s order.
  uint64_t window_at(uint64_t epoch, uint64_t position);

 private:
  void make_order(uint64_t epoch);
  const uint16_t* window_tokens(uint64_t window) const;  // T+1 tokens, their ids checked

  std::vector<std::string> paths_;
  std::vector<MappedShard> shards_;
  std::vector<uint64_t> first_window_;  // first_window_[s]: global index of shard s's first window; size S+1
  uint64_t n_windows_ = 0;
  int64_t tokens_in_shards_ = 0;
  int B_, T_;
  int vocab_size_;
  uint64_t seed_;
  bool shuffle_;
  int dp_rank_, dp_size_;
  LoaderCursor cursor_;
  std::vector<uint32_t> order_;  // the permutation of the current epoch (empty when !shuffle_)
  uint64_t order_epoch_ = UINT64_MAX;
};

// The windows a loader of sequence length T finds in these shards, from their headers alone (no
// token is read). Errors: those of opening a shard, and a shard shorter than one window.
int64_t count_windows(const std::vector<std::string>& shard_paths, int T);

// The files matching a glob(3) pattern, sorted; no match is a clear error naming the pattern.
std::vector<std::string> expand_shard_glob(const std::string& pattern);

}  // namespace dt
