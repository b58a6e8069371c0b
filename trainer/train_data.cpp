#include "trainer/train_data.h"

#include <fmt/format.h>

#include "core/error.h"
#include "data/manifest.h"

namespace dt {

namespace {

// The shard files of a data.* glob, checked against their sets' manifests; the error names the key.
std::vector<std::string> shard_paths(const std::string& pattern, const char* key, bool require_manifest) {
  std::vector<std::string> paths;
  try {
    paths = expand_shard_glob(pattern);
  } catch (const Error& e) {
    DT_FAIL("{}: {}", key, e.what());
  }
  check_shard_sets(pattern, paths, require_manifest, key);
  return paths;
}

void check_train_windows(const Config& cfg, const std::vector<std::string>& paths, int dp_size) {
  const TrainConfig& t = cfg.train;
  const int64_t have = count_windows(paths, t.seq_len);
  const int64_t need = static_cast<int64_t>(t.batch_size) * dp_size;
  DT_CHECK(have >= need,
           "data.train = '{}': the training shards ({}) hold {} windows of train.seq_len + 1 = {} tokens, fewer than "
           "one global batch of train.batch_size x data-parallel ranks = {} x {} = {} windows; add training data "
           "(a larger input to `deltatron prepare`, or a smaller --val-tokens / --val-docs), or lower "
           "train.batch_size or train.seq_len",
           cfg.data.train, describe_files(paths), have, t.seq_len + 1, t.batch_size, dp_size, need);
}

void check_val_windows(const Config& cfg, const std::vector<std::string>& paths, int dp_size) {
  const TrainConfig& t = cfg.train;
  const int64_t have = count_windows(paths, t.seq_len);
  const int64_t batch = static_cast<int64_t>(t.batch_size) * dp_size;
  const int64_t need = t.eval_batches * batch;
  DT_CHECK(have >= need,
           "data.val = '{}': the validation shards ({}) hold {} windows of train.seq_len + 1 = {} tokens, fewer than "
           "the {} that train.eval_batches = {} batches of train.batch_size x data-parallel ranks = {} x {} need; "
           "make a larger validation split (`deltatron prepare ... --val-tokens {}`), or lower train.eval_batches "
           "(to at most {}; 0: no validation)",
           cfg.data.val, describe_files(paths), have, t.seq_len + 1, need, t.eval_batches, t.batch_size, dp_size,
           eval_tokens_needed(t, dp_size), have / batch);
}

// Reads the loader's next batch and puts the cursor back: every id of those windows is checked.
void read_first_batch(DataLoader& loader, const TrainConfig& t) {
  std::vector<int32_t> inputs(static_cast<size_t>(t.batch_size) * t.seq_len), targets(inputs.size());
  const LoaderCursor cursor = loader.cursor();
  loader.next(inputs.data(), targets.data());
  loader.restore(cursor);
}

}  // namespace

std::string describe_files(const std::vector<std::string>& paths) {
  constexpr size_t kShown = 3;
  std::string text;
  for (size_t i = 0; i < paths.size() && i < kShown; ++i) text += (i ? ", " : "") + paths[i];
  if (paths.size() > kShown) text += fmt::format(" and {} more", paths.size() - kShown);
  return text;
}

TrainData open_train_data(const Config& cfg, int dp_rank, int dp_size) {
  const TrainConfig& t = cfg.train;
  TrainData d;
  const std::vector<std::string> train_paths = shard_paths(cfg.data.train, "data.train", cfg.data.require_manifest);
  check_train_windows(cfg, train_paths, dp_size);
  d.train = std::make_unique<DataLoader>(train_paths, t.batch_size, t.seq_len, cfg.model.vocab_size, t.seed,
                                         cfg.data.shuffle, dp_rank, dp_size);
  read_first_batch(*d.train, t);
  if (t.eval_batches > 0) {
    const std::vector<std::string> val_paths = shard_paths(cfg.data.val, "data.val", cfg.data.require_manifest);
    check_val_windows(cfg, val_paths, dp_size);
    d.val = std::make_unique<DataLoader>(val_paths, t.batch_size, t.seq_len, cfg.model.vocab_size, t.seed,
                                         /*shuffle=*/false, dp_rank, dp_size);
    read_first_batch(*d.val, t);
  }
  return d;
}

}  // namespace dt
