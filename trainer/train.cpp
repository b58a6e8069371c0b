#include "trainer/train.h"

#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>
#include <vector>

#include "core/context.h"
#include "data/loader.h"
#include "layers/model.h"
#include "trainer/adamw.h"
#include "trainer/evaluate.h"
#include "trainer/metrics.h"
#include "trainer/schedule.h"

namespace dt {

namespace fs = std::filesystem;

namespace {

// The shard files of a data.* glob; the error names the key.
std::vector<std::string> shard_paths(const std::string& pattern, const char* key) {
  try {
    return expand_shard_glob(pattern);
  } catch (const Error& e) {
    DT_FAIL("{}: {}", key, e.what());
  }
}

// Makes the run directory; refuses to overwrite a finished or running run's metrics.
void prepare_run_dir(const std::string& dir, bool overwrite) {
  std::error_code ec;
  fs::path metrics = fs::path(dir) / "metrics.jsonl";
  DT_CHECK(overwrite || !fs::exists(metrics, ec),
           "the run directory '{}' already holds metrics.jsonl from an earlier run; pass --overwrite to replace it, "
           "or choose another --run-dir (or run.name)",
           dir);
  fs::create_directories(dir, ec);
  DT_CHECK(!ec && fs::is_directory(dir), "cannot create the run directory '{}': {}", dir, ec.message());
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  DT_CHECK(out.good(), "cannot write '{}'", path.string());
}

}  // namespace

std::string run_dir_of(const Config& cfg, const std::string& override_dir) {
  if (!override_dir.empty()) return override_dir;
  return (fs::path(cfg.run.dir) / (cfg.run.name.empty() ? "run" : cfg.run.name)).string();
}

TrainSummary train(const Config& cfg, const TrainOptions& options) {
  validate_config(cfg);
  const TrainConfig& tc = cfg.train;
  DT_CHECK(cfg.run.device != "cuda",
           "run.device = cuda: the CUDA backend is not built yet; use run.device: auto or cpu to train on the CPU");
  DT_CHECK(cfg.parallel.tp == 1,
           "parallel.tp = {}: tensor parallelism needs the multi-process backend, which is not built yet; set "
           "parallel.tp: 1",
           cfg.parallel.tp);

  // Data first: a missing or bad shard is reported before anything is written.
  const int B = tc.batch_size, T = tc.seq_len;
  DataLoader train_loader(shard_paths(cfg.data.train, "data.train"), B, T, cfg.model.vocab_size, tc.seed,
                          cfg.data.shuffle);
  std::unique_ptr<DataLoader> val_loader;
  if (tc.eval_batches > 0)
    val_loader = std::make_unique<DataLoader>(shard_paths(cfg.data.val, "data.val"), B, T, cfg.model.vocab_size,
                                              tc.seed, /*shuffle=*/false);

  TrainSummary summary;
  summary.run_dir = run_dir_of(cfg, options.run_dir);
  prepare_run_dir(summary.run_dir, options.overwrite);
  const fs::path dir(summary.run_dir);
  write_text(dir / "config.yaml",
             "# The resolved config of this run; `deltatron train --config` with this file repeats it.\n" +
                 config_to_yaml(cfg));
  MetricsWriter metrics((dir / "metrics.jsonl").string());
  bool tty = options.console && ::isatty(::fileno(options.console));
  RunLog log((dir / "log.txt").string(), options.console, tty);

  if (cfg.run.device == "auto")
    log.print("device: cpu (GPU training arrives with the CUDA backend; until then `auto` trains on the CPU)");
  int threads = cfg.run.threads > 0 ? cfg.run.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  openblas_set_num_threads(threads);

  Model model(cfg.model, B, T, DType::kF32, Device::kCPU);
  model.init(tc.seed);
  log.print(model.summary());
  int64_t n_eval = 0;
  if (val_loader) {
    n_eval = std::min<int64_t>(tc.eval_batches, val_loader->batches_per_epoch());
    if (n_eval < tc.eval_batches)
      log.print(fmt::format("note: the validation shards hold {} batches of {} x {}; evaluating on those, not "
                            "train.eval_batches = {}",
                            n_eval, B, T, tc.eval_batches));
  }
  log.print(fmt::format("data: {} train tokens ({} batches of {} x {} per epoch), {} validation tokens; {} steps = "
                        "{:.2f} epochs; {} threads; run directory {}",
                        train_loader.tokens_in_shards(), train_loader.batches_per_epoch(), B, T,
                        val_loader ? val_loader->tokens_in_shards() : 0, tc.steps,
                        static_cast<double>(tc.steps) / train_loader.batches_per_epoch(), threads, summary.run_dir));

  ParamStore& params = model.params();
  AdamW opt(params, {tc.beta1, tc.beta2, tc.eps, tc.weight_decay});
  Context ctx;
  ctx.device = Device::kCPU;
  std::vector<int32_t> inputs(static_cast<size_t>(B) * T), targets(inputs.size());

  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  auto seconds_since = [](clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); };
  double train_seconds = 0;  // time in training steps, evaluations left out, for the rate and the ETA
  int64_t tokens = 0;

  auto run_eval = [&](int step) {
    double val = evaluate(model, ctx, *val_loader, n_eval);
    summary.val_loss = val;
    metrics.write({{"step", step}, {"val_loss", val}, {"tokens", tokens}, {"time_s", seconds_since(start)}});
    log.print(fmt::format("eval step {}/{} | val_loss {:.4f}", step, tc.steps, val));
  };

  for (int step = 1; step <= tc.steps; ++step) {
    const auto t0 = clock::now();
    params.zero_grads();
    train_loader.next(inputs.data(), targets.data());
    double loss = model.forward(ctx, inputs.data(), targets.data());
    model.backward(ctx);
    double grad_norm = clip_grad_norm(params, tc.grad_clip);
    double lr = lr_at_step(step, tc.steps, tc.warmup_steps, tc.lr, tc.min_lr);
    if (!std::isfinite(loss) || !std::isfinite(grad_norm)) {
      metrics.write({{"step", step}, {"loss", loss}, {"lr", lr}, {"grad_norm", grad_norm}});
      DT_FAIL("training diverged at step {}: loss {}, gradient norm {}; lower train.lr (now {}), raise "
              "train.warmup_steps or set train.grad_clip",
              step, loss, grad_norm, tc.lr);
    }
    opt.step(lr);
    const double dt = seconds_since(t0);
    train_seconds += dt;
    tokens += static_cast<int64_t>(B) * T;
    if (step == 1) summary.first_loss = loss;
    summary.last_loss = loss;
    summary.steps = step;
    metrics.write({{"step", step},
                   {"loss", loss},
                   {"lr", lr},
                   {"grad_norm", grad_norm},
                   {"tokens", tokens},
                   {"tokens_per_s", static_cast<double>(B) * T / dt},
                   {"time_s", seconds_since(start)}});
    const bool keep = step % cfg.run.log_every == 0 || step == 1 || step == tc.steps;
    log.progress(format_progress(step, tc.steps, loss, lr, tokens / train_seconds,
                                 train_seconds / step * (tc.steps - step)),
                 keep);
    if (val_loader && ((tc.eval_every > 0 && step % tc.eval_every == 0) || step == tc.steps)) run_eval(step);
  }
  summary.seconds = seconds_since(start);
  log.print(fmt::format("done: {} steps in {} | loss {:.4f} -> {:.4f}{} | {}", summary.steps,
                        format_duration(summary.seconds), summary.first_loss, summary.last_loss,
                        std::isnan(summary.val_loss) ? "" : fmt::format(" | val_loss {:.4f}", summary.val_loss),
                        summary.run_dir));
  return summary;
}

}  // namespace dt
