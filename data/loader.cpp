#include "data/loader.h"

#include <glob.h>

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "core/philox.h"
#include "data/shard.h"

namespace dt {

namespace {

// The windows of T+1 tokens starting every T tokens in the shard at `path` of n tokens.
int64_t shard_windows(const std::string& path, int64_t n, int T) {
  DT_CHECK(n >= static_cast<int64_t>(T) + 1,
           "shard {}: {} tokens, fewer than one training window of T+1 = {} tokens; use a shorter sequence "
           "length T, or leave this shard out",
           path, n, static_cast<int64_t>(T) + 1);
  return (n - 1) / T;
}

}  // namespace

DataLoader::DataLoader(std::vector<std::string> shard_paths, int B, int T, int vocab_size, uint64_t seed,
                       bool shuffle, int dp_rank, int dp_size)
    : paths_(std::move(shard_paths)),
      B_(B),
      T_(T),
      vocab_size_(vocab_size),
      seed_(seed),
      shuffle_(shuffle),
      dp_rank_(dp_rank),
      dp_size_(dp_size) {
  DT_CHECK(!paths_.empty(), "data loader: no shard files given; pass shards such as 'shards/*_train_*.bin'");
  DT_CHECK(B >= 1 && T >= 1, "data loader: batch size B = {} and sequence length T = {} must both be >= 1", B, T);
  DT_CHECK(dp_size >= 1 && dp_rank >= 0 && dp_rank < dp_size,
           "data loader: data-parallel rank {} is not in [0, dp_size = {})", dp_rank, dp_size);
  DT_CHECK(vocab_size > 0, "data loader: vocab_size must be positive, got {}; set model.vocab_size", vocab_size);
  const auto access = shuffle ? MappedShard::Access::kRandom : MappedShard::Access::kSequential;
  shards_.reserve(paths_.size());
  first_window_.push_back(0);
  for (const std::string& path : paths_) {
    shards_.emplace_back(path, access);
    const int64_t n = shards_.back().size();
    n_windows_ += static_cast<uint64_t>(shard_windows(path, n, T));
    tokens_in_shards_ += n;
    first_window_.push_back(n_windows_);
  }
  const uint64_t global_batch = static_cast<uint64_t>(B) * static_cast<uint64_t>(dp_size);
  DT_CHECK(n_windows_ >= global_batch,
           "data loader: the {} shard(s) hold {} windows of T+1 = {} tokens, fewer than one global batch of "
           "B x dp_size = {} x {} = {} windows; use a smaller batch size or sequence length, or more data",
           paths_.size(), n_windows_, static_cast<int64_t>(T) + 1, B, dp_size, global_batch);
  DT_CHECK(n_windows_ <= UINT32_MAX,
           "data loader: {} windows exceed the 2^32 this loader can order; use a longer sequence length",
           n_windows_);
}

// Fisher-Yates with Philox draws keyed by (seed, epoch): torch.randperm(W, generator=g(seed, epoch)).
void DataLoader::make_order(uint64_t epoch) {
  if (!shuffle_ || order_epoch_ == epoch) return;
  order_.resize(n_windows_);
  std::iota(order_.begin(), order_.end(), 0u);
  const uint64_t stream = philox_stream_of("data_loader") + epoch;
  for (uint64_t i = n_windows_ - 1; i > 0; --i) {
    PhiloxOut r = philox4x32(seed_, stream, i);
    const uint64_t bits = static_cast<uint64_t>(r.v[0]) | (static_cast<uint64_t>(r.v[1]) << 32);
    // j uniform in [0, i] (Lemire's multiply-shift; bias below 2^-32 for W < 2^32).
    const uint64_t j = static_cast<uint64_t>((static_cast<unsigned __int128>(bits) * (i + 1)) >> 64);
    std::swap(order_[i], order_[j]);
  }
  order_epoch_ = epoch;
}

uint64_t DataLoader::window_at(uint64_t epoch, uint64_t position) {
  DT_ASSERT(position < n_windows_);
  if (!shuffle_) return position;
  make_order(epoch);
  return order_[position];
}

const uint16_t* DataLoader::window_tokens(uint64_t window) const {
  // The shard s with first_window_[s] <= window < first_window_[s + 1].
  auto it = std::upper_bound(first_window_.begin(), first_window_.end(), window);
  const size_t s = static_cast<size_t>(it - first_window_.begin()) - 1;
  const uint64_t offset = (window - first_window_[s]) * static_cast<uint64_t>(T_);
  std::span<const uint16_t> w = shards_[s].tokens().subspan(offset, static_cast<size_t>(T_) + 1);
  shard_check_ids(w, vocab_size_, paths_[s], static_cast<int64_t>(offset));
  return w.data();
}

void DataLoader::next(int32_t* inputs, int32_t* targets) {
  const uint64_t global_batch = static_cast<uint64_t>(B_) * static_cast<uint64_t>(dp_size_);
  if (cursor_.position + global_batch > n_windows_) {
    ++cursor_.epoch;
    cursor_.position = 0;
  }
  for (int b = 0; b < B_; ++b) {
    const uint64_t pos = cursor_.position + static_cast<uint64_t>(b) * dp_size_ + dp_rank_;
    const uint16_t* w = window_tokens(window_at(cursor_.epoch, pos));
    int32_t* in = inputs + static_cast<size_t>(b) * T_;
    int32_t* tg = targets + static_cast<size_t>(b) * T_;
    for (int t = 0; t < T_; ++t) {
      in[t] = w[t];
      tg[t] = w[t + 1];
    }
  }
  cursor_.position += global_batch;
}

void DataLoader::restore(const LoaderCursor& cursor) {
  DT_CHECK(cursor.position <= n_windows_,
           "data loader: the saved cursor's position {} is beyond the {} windows of these shards; was the "
           "checkpoint made with other data or another sequence length?",
           cursor.position, n_windows_);
  cursor_ = cursor;
}

int64_t DataLoader::windows_per_epoch() const { return batches_per_epoch() * B_; }

int64_t DataLoader::batches_per_epoch() const {
  return static_cast<int64_t>(n_windows_ / (static_cast<uint64_t>(B_) * static_cast<uint64_t>(dp_size_)));
}

int64_t count_windows(const std::vector<std::string>& shard_paths, int T) {
  int64_t windows = 0;
  for (const std::string& path : shard_paths)
    windows += shard_windows(path, MappedShard(path, MappedShard::Access::kRandom).size(), T);
  return windows;
}

std::vector<std::string> expand_shard_glob(const std::string& pattern) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  std::vector<std::string> paths;
  if (rc == 0) paths.assign(g.gl_pathv, g.gl_pathv + g.gl_pathc);
  ::globfree(&g);
  DT_CHECK(rc != GLOB_NOSPACE && rc != GLOB_ABORTED, "cannot expand the shard pattern '{}': a read error", pattern);
  DT_CHECK(!paths.empty(),
           "no shard files match '{}'; check the path (quote the pattern so the shell leaves it alone), or make "
           "shards with `deltatron prepare`",
           pattern);
  std::sort(paths.begin(), paths.end());  // glob sorts already, but by locale; we want byte order
  return paths;
}

}  // namespace dt
