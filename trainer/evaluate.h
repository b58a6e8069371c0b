// Validation loss: the mean of the model's loss over the first `batches` batches of a loader.
// The loader is reset first, so every evaluation sees the same tokens and values are
// comparable across steps (the loader should have shuffle = false).
//
// evaluate_checkpoint does the same for a checkpoint file (`deltatron eval`): the model is built
// from the config stored in the checkpoint, its parameters loaded and checked, and the loss taken
// over the config's validation shards (or others) in batches of train.batch_size x train.seq_len,
// so the value equals the run's own val_loss at that step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/context.h"
#include "data/loader.h"
#include "layers/model.h"

namespace dt {

double evaluate(Model& model, Context& ctx, DataLoader& loader, int64_t batches);

struct CheckpointEvalOptions {
  std::string data;     // glob of token shards; empty: the checkpoint config's data.val
  int64_t batches = 0;  // 0: the config's train.eval_batches (or one pass over the data when that is 0)
  int threads = 0;      // OpenBLAS threads; 0: the config's run.threads (0 there: all cores)
  std::string device = "auto";  // auto, cpu or cuda (trainer/runtime.h)
};

struct CheckpointEval {
  std::string checkpoint;
  int64_t step = 0;       // the checkpoint's training step
  std::string data;       // the glob evaluated
  int64_t batches = 0;    // batches evaluated (fewer than asked when the data holds fewer)
  int batch_size = 0, seq_len = 0;
  int64_t tokens = 0;     // batches * batch_size * seq_len
  double val_loss = 0;
  std::string note;       // why fewer batches than asked, or empty
  std::string device;     // the device line (describe_device)
};

CheckpointEval evaluate_checkpoint(const std::string& path, const CheckpointEvalOptions& options);

}  // namespace dt
