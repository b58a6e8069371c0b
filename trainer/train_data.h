// The data loaders of a training run (data/loader.h), built from data.train and data.val. A set too
// small for the config is an error naming the key, the glob, the files and the numbers: the training
// shards must hold one global batch (train.batch_size x dp windows of train.seq_len + 1 tokens), the
// validation shards train.eval_batches of them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/loader.h"
#include "trainer/config.h"

namespace dt {

struct TrainData {
  std::unique_ptr<DataLoader> train;
  std::unique_ptr<DataLoader> val;  // null when train.eval_batches is 0
};

// The loaders of DP rank `dp_rank` of `dp_size`. The first batch of each is read once (and the
// cursor put back), so that shards of another tokenizer (ids >= model.vocab_size) are refused
// before the run writes anything; later windows are checked as they are read.
TrainData open_train_data(const Config& cfg, int dp_rank, int dp_size);

// "a.bin", "a.bin, b.bin", or "a.bin, b.bin, c.bin and 7 more": the files in a message.
std::string describe_files(const std::vector<std::string>& paths);

}  // namespace dt
