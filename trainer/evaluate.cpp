#include "trainer/evaluate.h"

#include <cblas.h>

#include <algorithm>
#include <thread>

#include "data/manifest.h"
#include "trainer/config.h"
#include "trainer/config_validate.h"
#include "trainer/memory_check.h"
#include "trainer/runtime.h"
#include "trainer/train_checkpoint.h"

namespace dt {

double evaluate(Model& model, Context& ctx, DataLoader& loader, int64_t batches) {
  DT_CHECK(batches >= 1, "evaluate: needs at least one batch, got {}", batches);
  const size_t n = static_cast<size_t>(model.batch()) * model.seq_len();
  std::vector<int32_t> inputs(n), targets(n);
  loader.reset();
  double sum = 0;
  for (int64_t b = 0; b < batches; ++b) {
    loader.next(inputs.data(), targets.data());
    sum += model.forward(ctx, inputs.data(), targets.data());
  }
  return sum / static_cast<double>(batches);
}

CheckpointEval evaluate_checkpoint(const std::string& path, const CheckpointEvalOptions& options) {
  DT_CHECK(options.batches >= 0, "--batches = {}: give a number of batches >= 1", options.batches);
  DT_CHECK(options.threads >= 0, "--threads = {}: give a thread count >= 1 (0: all cores)", options.threads);
  CheckpointState state = checkpoint_read_state(path);  // verifies the whole file first
  const Config cfg = checkpoint_config(path, state);
  CheckpointEval r;
  r.checkpoint = path;
  r.step = state.step;
  r.data = options.data.empty() ? cfg.data.val : options.data;
  r.batch_size = cfg.train.batch_size;
  r.seq_len = cfg.train.seq_len;
  std::vector<std::string> shards;
  const char* key = options.data.empty() ? "data.val (from the checkpoint's config; pass --data GLOB)" : "--data";
  try {
    shards = expand_shard_glob(r.data);
  } catch (const Error& e) {
    DT_FAIL("{}: {}", key, e.what());
  }
  check_shard_sets(r.data, shards, cfg.data.require_manifest, key);  // data/manifest.h
  DataLoader loader(shards, r.batch_size, r.seq_len, cfg.model.vocab_size, cfg.train.seed, /*shuffle=*/false);
  const int64_t available = loader.batches_per_epoch();
  const int64_t wanted = options.batches > 0          ? options.batches
                         : cfg.train.eval_batches > 0 ? cfg.train.eval_batches
                                                      : available;
  r.batches = std::min(wanted, available);
  if (r.batches < wanted)
    r.note = fmt::format("the data holds {} batches of {} x {}; evaluated on those, not {}", available, r.batch_size,
                         r.seq_len, wanted);
  r.tokens = r.batches * r.batch_size * r.seq_len;

  int threads = options.threads > 0 ? options.threads : cfg.run.threads;
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  openblas_set_num_threads(threads);
  const Device device = resolve_device(options.device);
  validate_config_for_device(cfg.model, device, /*training=*/false);  // the GPU kernels' limits
  Runtime runtime(device);
  r.device = describe_device(runtime.device(), options.device);
  check_memory_fits(cfg.model, static_cast<int>(r.batch_size), static_cast<int>(r.seq_len), 1, 1, false,
                    /*training=*/false, runtime.device(), available_memory(runtime.device()));
  Model model(cfg.model, r.batch_size, r.seq_len, DType::kF32, runtime.device());
  load_train_checkpoint(path, model.params(), nullptr);
  r.val_loss = evaluate(model, runtime.ctx(), loader, r.batches);
  return r;
}

}  // namespace dt
