#include "trainer/train.h"

#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include "core/context.h"
#include "core/peak_memory.h"
#include "data/loader.h"
#include "layers/model.h"
#include "trainer/adamw.h"
#include "trainer/checkpointing.h"
#include "trainer/evaluate.h"
#include "trainer/grad_sync.h"
#include "trainer/memory_check.h"
#include "trainer/metrics.h"
#include "trainer/mfu.h"
#include "trainer/run_lock.h"
#include "trainer/runtime.h"
#include "trainer/schedule.h"
#include "trainer/stop_signal.h"
#include "trainer/train_data.h"
#include "kernels/ops.h"
#include "parallel/dp_grads.h"
#include "parallel/mpi_runtime.h"
#include "parallel/process_grid.h"
#include "parallel/process_groups.h"

namespace dt {

namespace fs = std::filesystem;

namespace {

void make_dir(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  DT_CHECK(!ec && fs::is_directory(dir), "cannot create the directory '{}': {}", dir.string(), ec.message());
}

// Removes leftovers of saves cut short by a crash; returns what to report.
std::vector<std::string> remove_partial_checkpoints(const std::string& ckpt_dir) {
  std::vector<std::string> notes;
  for (const std::string& p : list_partial_checkpoints(ckpt_dir)) {
    std::error_code ec;
    if (fs::remove(p, ec)) notes.push_back(fmt::format("removed {}, a checkpoint save cut short by a crash", p));
  }
  return notes;
}

// A fresh run refuses a directory that holds an earlier run (metrics or checkpoints) unless
// `overwrite`; then the earlier checkpoints are deleted, since keep_last and --resume would
// otherwise mix them with this run's. Returns what to report.
std::vector<std::string> prepare_fresh_run_dir(const std::string& dir, bool overwrite) {
  std::error_code ec;
  const std::string ckpt_dir = checkpoints_dir(dir);
  std::vector<CheckpointFile> old = list_checkpoints(ckpt_dir);
  DT_CHECK(overwrite || (!fs::exists(fs::path(dir) / "metrics.jsonl", ec) && old.empty()),
           "the run directory '{}' already holds {} from an earlier run; pass --resume to continue it, --overwrite "
           "to replace it, or choose another --run-dir (or run.name)",
           dir, old.empty() ? "metrics.jsonl" : "checkpoints");
  make_dir(dir);
  std::vector<std::string> notes = remove_partial_checkpoints(ckpt_dir);
  for (const CheckpointFile& f : old)
    if (fs::remove(f.path, ec)) notes.push_back(fmt::format("--overwrite: deleted {} of the earlier run", f.path));
  return notes;
}

// Keeps the lines of metrics.jsonl up to `step` (a resumed run redoes the steps after it) through a
// temporary file and a rename, so that a crash here loses nothing. Returns the largest time_s kept.
double truncate_metrics(const fs::path& path, int64_t step, std::vector<std::string>& notes) {
  std::ifstream in(path);
  if (!in.good()) return 0;
  std::stringstream text;
  text << in.rdbuf();
  in.close();
  // A last line without its newline would have the next record appended to it: rewrite then too.
  const bool torn = !text.str().empty() && text.str().back() != '\n';
  std::string kept, line;
  double time_s = 0;
  int dropped = 0, unreadable = 0;
  while (std::getline(text, line)) {
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) {
      ++unreadable;  // a line cut short by the crash
      continue;
    }
    if (j["step"].get<int64_t>() > step) {
      ++dropped;
      continue;
    }
    if (j.contains("time_s") && j["time_s"].is_number()) time_s = std::max(time_s, j["time_s"].get<double>());
    kept += line + "\n";
  }
  if (dropped == 0 && unreadable == 0 && !torn) return time_s;
  fs::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << kept;
    out.flush();
    DT_CHECK(out.good(), "cannot write '{}' (disk full?)", tmp.string());
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  DT_CHECK(!ec, "cannot replace '{}': {}", path.string(), ec.message());
  if (dropped) notes.push_back(fmt::format("metrics.jsonl: dropped {} lines after step {} (they are redone)", dropped, step));
  if (unreadable) notes.push_back(fmt::format("metrics.jsonl: dropped {} unreadable lines (cut short by a crash)", unreadable));
  return time_s;
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  DT_CHECK(out.good(), "cannot write '{}'", path.string());
}

// What --resume continues from, checked against the current config before anything is written.
struct ResumePoint {
  std::string path;
  CheckpointState state;
};

ResumePoint find_resume_point(const Config& cfg, const std::string& run_dir, const std::string& resume_from) {
  ResumePoint r;
  r.path = resume_from.empty() ? find_resume_checkpoint(run_dir) : resume_from;
  try {
    r.state = checkpoint_read_state(r.path);  // verifies the whole file's SHA-256
  } catch (const Error& e) {
    DT_FAIL("--resume: {}{}", e.what(),
            resume_from.empty() ? "; if it is damaged, delete it to resume from the checkpoint before it" : "");
  }
  check_resume_config(checkpoint_config(r.path, r.state), cfg, r.path);
  DT_CHECK(r.state.step <= cfg.train.steps,
           "--resume: checkpoint {} is at step {}, past train.steps = {}; raise train.steps (--set train.steps=N) to "
           "train further",
           r.path, r.state.step, cfg.train.steps);
  // A newer checkpoint in the run directory belongs to a later point of the run being resumed (or
  // of another run); continuing from an older one would interleave two histories in one directory.
  std::vector<CheckpointFile> files = list_checkpoints(checkpoints_dir(run_dir));
  if (!files.empty() && files.back().step > r.state.step)
    DT_FAIL("--resume {}: the run directory '{}' already holds a later checkpoint, {}; resume from that one (plain "
            "--resume), delete the later checkpoints, or continue in another --run-dir",
            r.path, run_dir, files.back().path);
  return r;
}

}  // namespace

std::string run_dir_of(const Config& cfg, const std::string& override_dir) {
  if (!override_dir.empty()) return override_dir;
  return (fs::path(cfg.run.dir) / (cfg.run.name.empty() ? "run" : cfg.run.name)).string();
}

std::string find_resume_checkpoint(const std::string& run_dir) {
  const std::string dir = checkpoints_dir(run_dir);
  std::vector<CheckpointFile> files = list_checkpoints(dir);
  DT_CHECK(!files.empty(),
           "--resume: no checkpoint in '{}'{}; set train.checkpoint_every to save checkpoints, pass --resume FILE, "
           "or start without --resume",
           dir, fs::exists(run_dir) ? "" : fmt::format(" (the run directory '{}' does not exist)", run_dir));
  return files.back().path;
}

TrainSummary train(const Config& cfg, const TrainOptions& options) {
  validate_config(cfg);
  const TrainConfig& tc = cfg.train;
  DT_CHECK(!(options.resume && options.overwrite),
           "--resume and --overwrite contradict each other: --resume continues the run in the run directory, "
           "--overwrite replaces it; pass one");

  // The ranks: world = tp x dp (docs/parallel.md, "The trainer under mpirun"). One process without
  // mpirun; train.batch_size is per DP rank, so a step takes dp x grad_accum x batch_size sequences.
  Runtime runtime(resolve_device(cfg.run.device));
  Context& ctx = runtime.ctx();
  std::unique_ptr<Communicator> own_world;
  Communicator* world = options.world;
  if (!world) {
    own_world = make_communicator({.device = runtime.device(),
                                   .timeout_s = cfg.parallel.timeout_s,
                                   .cuda_device = ctx.device_index,
                                   .stream = ctx.stream});
    world = own_world.get();
  }
  DT_CHECK(world->size() >= cfg.parallel.tp,
           "parallel.tp = {}: tensor parallelism needs the multi-process backend with at least that many ranks, but "
           "{} {} launched; run under `mpirun -np N` with N a multiple of {}, or set parallel.tp: 1",
           cfg.parallel.tp, world->size(), world->size() == 1 ? "process was" : "ranks were", cfg.parallel.tp);
  const ProcessGrid grid(world->rank(), world->size(), cfg.parallel.tp);
  ProcessGroups groups;
  if (world->size() > 1) {
    groups = make_process_groups(*world, grid);
    ctx.tp = groups.tp.get();
    ctx.dp = groups.dp.get();
  }
  ctx.grid = &grid;
  const int tp = grid.tp_size(), dp = grid.dp_size();
  const bool writer = world->rank() == 0;  // the one rank that writes the run directory

  // Data, model and the checkpoint to resume from first: a problem is reported before anything is written.
  const int B = tc.batch_size, T = tc.seq_len, A = tc.grad_accum;
  const int64_t tokens_per_step = static_cast<int64_t>(A) * B * T * dp;
  TrainData data = open_train_data(cfg, grid.dp_rank(), dp);
  DataLoader& train_loader = *data.train;
  DataLoader* val_loader = data.val.get();  // null without validation

  TrainSummary summary;
  summary.run_dir = run_dir_of(cfg, options.run_dir);
  const fs::path dir(summary.run_dir);
  const std::string ckpt_dir = checkpoints_dir(summary.run_dir);
  check_training_memory(cfg, runtime.device(), tp, dp);  // before the model allocates
  Model model(cfg.model, B, T, DType::kF32, runtime.device(), TpLayout{grid.tp_rank(), tp});
  model.init(tc.seed);
  ParamStore& params = model.params();
  // The mean of the gradients over the DP ranks, in buckets; ZeRO-1 reduce-scatters them instead
  // and the optimizer keeps this rank's shard of the moments (trainer/adamw.h).
  const bool zero1 = cfg.parallel.zero1 && dp > 1;
  std::unique_ptr<DpGradSync> dp_sync;
  if (ctx.dp && dp > 1)
    dp_sync = std::make_unique<DpGradSync>(*ctx.dp, params.grads_arena(),
                                           std::max<size_t>(1, static_cast<size_t>(cfg.parallel.bucket_mb * (1 << 20))),
                                           zero1 ? DpGradMode::kShardedMean : DpGradMode::kMean);
  const bool overlap = dp_sync && cfg.parallel.overlap_grad_sync;
  AdamW opt(params, {tc.beta1, tc.beta2, tc.eps, tc.weight_decay}, zero1 ? dp_sync.get() : nullptr);
  CheckpointState state;  // the loop's counters, as a checkpoint stores them
  state.rng_seed = tc.seed;
  state.rng_offset = 0;  // no random numbers are drawn after the init (no dropout)
  // One training process per run directory; taken before a resumed run's checkpoint is read (which
  // a running holder could prune meanwhile), and before anything is written.
  std::unique_ptr<RunLock> lock;
  auto take_lock = [&] {
    if (!writer || lock) return;
    make_dir(dir);
    lock = std::make_unique<RunLock>(summary.run_dir);
  };
  ResumePoint resume;
  if (options.resume) {
    if (fs::is_directory(dir)) take_lock();
    resume = find_resume_point(cfg, summary.run_dir, options.resume_from);
    state = load_train_checkpoint(resume.path, params, &opt);
    train_loader.restore({state.loader_epoch, state.loader_position});
    summary.resumed_from = resume.path;
    summary.start_step = static_cast<int>(state.step);
    summary.skipped_steps = static_cast<int>(state.skipped_steps);
  }

  std::vector<std::string> notes;
  double time_offset = 0;  // time_s of the run before the resumed checkpoint
  if (writer) {
    take_lock();
    if (options.resume) {
      notes = remove_partial_checkpoints(ckpt_dir);
      time_offset = truncate_metrics(dir / "metrics.jsonl", resume.state.step, notes);
    } else {
      notes = prepare_fresh_run_dir(summary.run_dir, options.overwrite);
    }
    write_text(dir / "config.yaml",
               "# The resolved config of this run; `deltatron train --config` with this file repeats it.\n" +
                   config_to_yaml(cfg));
  }
  // The other ranks write nowhere (metrics and log go to the null device).
  const std::string null_file = "/dev/null";
  MetricsWriter metrics(writer ? (dir / "metrics.jsonl").string() : null_file, /*append=*/options.resume);
  std::FILE* console = writer ? options.console : nullptr;
  bool tty = console && ::isatty(::fileno(console));
  RunLog log(writer ? (dir / "log.txt").string() : null_file, console, tty, /*append=*/options.resume);
  for (const std::string& n : notes) log.print("note: " + n);

  log.print(describe_device(runtime.device(), cfg.run.device));
  if (world->size() > 1)
    log.print(fmt::format("parallel: {} ranks = tp {} x dp {} ({} backend, collective timeout {:g} s); rank 0 writes "
                          "the run directory",
                          world->size(), tp, dp, world->backend(), world->timeout_s()));
  if (dp_sync) {
    // AdamW's two moments per parameter, in the parameters' dtype: 1/dp of them per rank under ZeRO-1.
    const double mib = 2.0 * static_cast<double>(params.grads_arena().bytes()) / (1 << 20);
    log.print(fmt::format("data parallel: {} gradient buckets of {} MiB, {}{}; optimizer state {:.1f} MiB per rank{}",
                          dp_sync->num_buckets(), cfg.parallel.bucket_mb,
                          zero1 ? "reduce-scattered (ZeRO-1)" : "all-reduced",
                          overlap ? ", overlapped with the backward" : "",
                          zero1 ? static_cast<double>(opt.state().bytes()) / (1 << 20) : mib,
                          zero1 ? fmt::format(" ({:.1f} MiB without ZeRO-1)", mib) : ""));
  } else if (cfg.parallel.zero1) {
    log.print("note: parallel.zero1 has no effect with one data-parallel rank");
  }
  int threads = cfg.run.threads > 0 ? cfg.run.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  openblas_set_num_threads(threads);

  if (options.resume)
    log.print(fmt::format("resuming from {} (step {}, {} tokens seen)", resume.path, state.step, state.tokens_seen));
  log.print(model.summary());
  log.print(fmt::format("data: {} train tokens ({} batches of {} x {} per epoch), {} validation tokens; {} steps of "
                        "{} x {} x {} tokens = {:.2f} epochs; {} threads; run directory {}",
                        train_loader.tokens_in_shards(), train_loader.batches_per_epoch(), B, T,
                        val_loader ? val_loader->tokens_in_shards() : 0, tc.steps, A, B * dp, T,
                        static_cast<double>(tc.steps) * A / train_loader.batches_per_epoch(), threads,
                        summary.run_dir));

  std::vector<int32_t> inputs(static_cast<size_t>(B) * T), targets(inputs.size());
  PeakMemory peak_memory(runtime.device());  // metrics.jsonl's peak_mem_gib

  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  auto seconds_since = [](clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); };
  auto time_s = [&] { return time_offset + seconds_since(start); };
  double train_seconds = 0;  // time in training steps, evaluations and saves left out, for the rate

  auto run_eval = [&](int step) {
    double val = evaluate(model, ctx, *val_loader, tc.eval_batches);
    if (ctx.dp) val = all_reduce_value(*ctx.dp, val, ReduceOp::kAvg);  // each DP rank saw its own batches
    summary.val_loss = val;
    metrics.write({{"step", step}, {"val_loss", val}, {"tokens", state.tokens_seen}, {"time_s", time_s()}});
    log.print(fmt::format("eval step {}/{} | val_loss {:.4f}", step, tc.steps, val));
  };
  int saved_step = -1;  // the step of the last checkpoint this call saved
  auto save_checkpoint = [&](int step) {
    const auto t0 = clock::now();
    saved_step = step;
    if (writer) make_dir(ckpt_dir);
    std::string path = (fs::path(ckpt_dir) / checkpoint_file_name(step)).string();
    LoaderCursor cursor = train_loader.cursor();
    state.loader_epoch = cursor.epoch;
    state.loader_position = cursor.position;
    // The DP replicas are identical: DP rank 0's TP group gathers the whole tensors, world rank 0 writes.
    // ZeRO-1: every DP rank first gives its shard of the moments.
    if (grid.dp_rank() == 0 || opt.sharded()) save_train_checkpoint(path, cfg, params, opt, state, ctx.tp, dp);
    if (!writer) return;
    std::error_code ec;
    double mb = static_cast<double>(fs::file_size(path, ec)) / (1 << 20);
    std::vector<std::string> deleted = prune_checkpoints(ckpt_dir, tc.keep_last, step);
    std::string pruned;
    for (const std::string& d : deleted) pruned += (pruned.empty() ? "; deleted " : ", ") + d;
    log.print(fmt::format("checkpoint step {}/{} saved to {} ({:.1f} MB in {:.2f}s){}", step, tc.steps, path, mb,
                          seconds_since(t0), pruned));
  };

  // SIGTERM / SIGINT: checkpoint after the current step and return (trainer/stop_signal.h).
  const StopSignal stop_signal;
  const int first_step = static_cast<int>(state.step) + 1;
  if (first_step > tc.steps)
    log.print(fmt::format("nothing to train: the checkpoint is at the last step, train.steps = {}; raise train.steps "
                          "(--set train.steps=N) to continue",
                          tc.steps));
  // Overlapped: as the last micro-batch's backward finishes a block's gradients, they are summed
  // over TP where partial and their DP buckets start; the same bits as syncing after the backward.
  GradsReady grads_ready;
  if (overlap)
    grads_ready = [&](int first, int end) {
      if (tp > 1) tp_sum_partial_grads(*ctx.tp, params, first, end);
      dp_sync->grads_ready(first, end);
    };
  const double flops_per_token = model_flops_per_token(model, tp);  // for the MFU of the progress line
  // The ETA goes by the wall time per step so far, evaluations and checkpoint saves included.
  const auto loop_start = clock::now();
  for (int step = first_step; step <= tc.steps; ++step) {
    const auto t0 = clock::now();
    params.zero_grads();
    double loss_sum = 0;
    for (int micro = 0; micro < A; ++micro) {
      train_loader.next(inputs.data(), targets.data());
      loss_sum += model.forward(ctx, inputs.data(), targets.data());
      // grads accumulate: d(mean over the A micro-batches); they are final in the last backward
      model.backward(ctx, 1.0 / A, micro == A - 1 ? grads_ready : GradsReady());
      peak_memory.sample();  // activations and gradients are both alive here
    }
    double loss = loss_sum / A;
    if (tp > 1 && !overlap) tp_sum_partial_grads(*ctx.tp, params, 0, params.size());
    if (dp_sync) {
      // The gradient of the mean loss over the global batch (ZeRO-1: of this rank's shard).
      if (overlap) dp_sync->finish(); else dp_sync->all_reduce_mean();
      loss = all_reduce_value(*ctx.dp, loss, ReduceOp::kAvg);
    }
    if (options.after_backward) options.after_backward(step, params);
    // The clipping factor goes to the update (AdamW::step scales as it reads): the gradients stay
    // unscaled, nothing reads them after the update, and the bits are those of scaling first.
    const GradClip clip = zero1    ? grad_clip_factor_zero1(ctx, opt, tp > 1 ? ctx.tp : nullptr, tc.grad_clip)
                          : tp > 1 ? grad_clip_factor_tp(ctx, params, *ctx.tp, tc.grad_clip)
                                   : grad_clip_factor(ctx, params, tc.grad_clip);
    const double grad_norm = clip.norm;
    const double lr = lr_at_step(step, tc.steps, tc.warmup_steps, tc.lr, tc.min_lr);
    // A non-finite loss or gradient would poison the weights and both moments for good: skip the
    // update (the batch is still consumed and the step counted, so the schedule stays in place).
    // Every rank takes the same decision (a NaN on one rank is seen by all). So with a stop signal
    // that reached this rank or another: all ranks stop after this step and take part in the
    // checkpoint save. Both flags travel in one all-reduce.
    bool flags[2] = {!std::isfinite(loss) || !std::isfinite(grad_norm), stop_signal.received() != 0};
    if (world->size() > 1) any_rank_each(*world, flags);
    const bool skip = flags[0], stop = flags[1];
    if (skip) {
      ++state.skipped_steps;
      ++state.skips_in_a_row;
    } else {
      opt.step(ctx, lr, clip.scale);
      state.skips_in_a_row = 0;
    }
    const double dt = seconds_since(t0);
    train_seconds += dt;
    state.step = step;
    state.tokens_seen += tokens_per_step;
    if (step == first_step) summary.first_loss = loss;
    summary.last_loss = loss;
    summary.steps = step;
    summary.skipped_steps = static_cast<int>(state.skipped_steps);
    nlohmann::ordered_json line = {{"step", step},
                                   {"loss", loss},  // a non-finite value is written as null
                                   {"lr", lr},
                                   {"grad_norm", grad_norm},
                                   {"tokens", state.tokens_seen},
                                   {"tokens_per_s", static_cast<double>(tokens_per_step) / dt},
                                   {"time_s", time_s()},
                                   {"peak_mem_gib", peak_memory.gib()}};
    if (skip) {
      line["skipped"] = true;
      line["skips_in_a_row"] = state.skips_in_a_row;
      line["skipped_steps"] = state.skipped_steps;
    }
    metrics.write(line);
    if (skip) {
      log.print(fmt::format("step {}/{}: loss {}, gradient norm {}: not finite, update skipped ({} in a row, {} in "
                            "all; train.max_skips_in_a_row = {})",
                            step, tc.steps, loss, grad_norm, state.skips_in_a_row, state.skipped_steps,
                            tc.max_skips_in_a_row));
      DT_CHECK(state.skips_in_a_row < tc.max_skips_in_a_row,
               "training stopped at step {}: the last {} steps had a non-finite loss or gradient norm (loss {}, "
               "gradient norm {}), train.max_skips_in_a_row = {}; the run has diverged: lower train.lr (now {}), "
               "raise train.warmup_steps or set train.grad_clip, and restart or --resume from a checkpoint before "
               "step {}",
               step, state.skips_in_a_row, loss, grad_norm, tc.max_skips_in_a_row, tc.lr,
               step - state.skips_in_a_row + 1);
    }
    const int done = step - first_step + 1;
    const bool keep = step % cfg.run.log_every == 0 || step == first_step || step == tc.steps;
    const double tokens_per_s = static_cast<double>(tokens_per_step) * done / train_seconds;
    log.progress(format_progress({.step = step,
                                  .steps = tc.steps,
                                  .loss = loss,
                                  .lr = lr,
                                  .grad_norm = grad_norm,
                                  .tokens_per_s = tokens_per_s,
                                  // per GPU: this rank's share of the tokens and of the model FLOPs
                                  .mfu = runtime.device() == Device::kCPU ? -1.0 : mfu(tokens_per_s / dp, flops_per_token),
                                  .peak_mem_gib = peak_memory.gib(),
                                  .elapsed_s = time_s(),
                                  .eta_s = seconds_since(loop_start) / done * (tc.steps - step)}),
                 keep);
    // The evaluation comes before the checkpoint, so that a checkpoint's metrics are complete.
    if (val_loader && ((tc.eval_every > 0 && step % tc.eval_every == 0) || step == tc.steps)) run_eval(step);
    if (tc.checkpoint_every > 0 && (step % tc.checkpoint_every == 0 || step == tc.steps)) save_checkpoint(step);
    if (step < tc.steps && stop) {
      if (saved_step != step) save_checkpoint(step);
      summary.stopped_by_signal = true;
      log.print(fmt::format("stopped by {} after step {}/{}: checkpoint saved to {}; continue the run with the same "
                            "command and --resume",
                            stop_signal.received() ? stop_signal_name(stop_signal.received()) : "a signal to another rank",
                            step, tc.steps, (fs::path(ckpt_dir) / checkpoint_file_name(step)).string()));
      break;
    }
  }
  summary.seconds = seconds_since(start);
  if (summary.steps == 0) summary.steps = static_cast<int>(state.step);
  log.print(fmt::format("done: {} steps in {} | loss {:.4f} -> {:.4f}{}{} | {}", summary.steps - summary.start_step,
                        format_duration(summary.seconds), summary.first_loss, summary.last_loss,
                        std::isnan(summary.val_loss) ? "" : fmt::format(" | val_loss {:.4f}", summary.val_loss),
                        summary.skipped_steps ? fmt::format(" | {} updates skipped", summary.skipped_steps) : "",
                        summary.run_dir));
  return summary;
}

}  // namespace dt
