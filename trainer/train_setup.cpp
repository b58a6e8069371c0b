// The setup of a training run: TrainRun's constructor (trainer/train_run.h).
#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "parallel/dp_grads.h"
#include "parallel/mpi_runtime.h"
#include "trainer/config_validate.h"
#include "trainer/grad_sync.h"
#include "trainer/memory_check.h"
#include "trainer/train_run.h"

namespace dt {

namespace fs = std::filesystem;

namespace {

// The checks that come before anything else; then the device of the run, against whose kernels'
// limits the model is checked (trainer/config_validate.h).
Device checked_device(const Config& cfg, const TrainOptions& options) {
  validate_config(cfg);
  DT_CHECK(!(options.resume && options.overwrite),
           "--resume and --overwrite contradict each other: --resume continues the run in the run directory, "
           "--overwrite replaces it; pass one");
  const Device device = resolve_device(cfg.run.device);
  validate_config_for_device(cfg.model, device, /*training=*/true);
  return device;
}

}  // namespace

TrainRun::TrainRun(const Config& cfg, const TrainOptions& options)
    : cfg_(cfg),
      tc_(cfg.train),
      options_(options),
      runtime_(checked_device(cfg, options)),
      ctx_(runtime_.ctx()),
      peak_memory_(runtime_.device()) {
  setup_ranks();
  // Data, model and the checkpoint to resume from first: a problem is reported before anything is written.
  setup_model();
  setup_resume();
  open_reports(prepare_run_dir());
  start_ = Clock::now();
}

TrainRun::~TrainRun() = default;

void TrainRun::setup_ranks() {
  // One process without mpirun; train.batch_size is per DP rank, so a step takes dp x grad_accum x
  // batch_size sequences.
  world_ = options_.world;
  if (!world_) {
    own_world_ = make_communicator({.device = runtime_.device(),
                                    .timeout_s = cfg_.parallel.timeout_s,
                                    .cuda_device = ctx_.device_index,
                                    .stream = ctx_.stream});
    world_ = own_world_.get();
  }
  DT_CHECK(world_->size() >= cfg_.parallel.tp,
           "parallel.tp = {}: tensor parallelism needs the multi-process backend with at least that many ranks, but "
           "{} {} launched; run under `mpirun -np N` with N a multiple of {}, or set parallel.tp: 1",
           cfg_.parallel.tp, world_->size(), world_->size() == 1 ? "process was" : "ranks were", cfg_.parallel.tp);
  grid_.emplace(world_->rank(), world_->size(), cfg_.parallel.tp);
  if (world_->size() > 1) {
    groups_ = make_process_groups(*world_, *grid_);
    ctx_.tp = groups_.tp.get();
    ctx_.dp = groups_.dp.get();
  }
  ctx_.grid = &*grid_;
  tp_ = grid_->tp_size();
  dp_ = grid_->dp_size();
  writer_ = world_->rank() == 0;
}

void TrainRun::setup_model() {
  B_ = tc_.batch_size;
  T_ = tc_.seq_len;
  A_ = tc_.grad_accum;
  tokens_per_step_ = static_cast<int64_t>(A_) * B_ * T_ * dp_;
  data_ = open_train_data(cfg_, grid_->dp_rank(), dp_);
  train_loader_ = data_.train.get();
  val_loader_ = data_.val.get();

  summary_.run_dir = run_dir_of(cfg_, options_.run_dir);
  dir_ = summary_.run_dir;
  ckpt_dir_ = checkpoints_dir(summary_.run_dir);
  check_training_memory(cfg_, runtime_.device(), tp_, dp_);  // before the model allocates
  model_.emplace(cfg_.model, B_, T_, DType::kF32, runtime_.device(), TpLayout{grid_->tp_rank(), tp_});
  model_->init(tc_.seed);
  params_ = &model_->params();
  // The mean of the gradients over the DP ranks, in buckets; ZeRO-1 reduce-scatters them instead
  // and the optimizer keeps this rank's shard of the moments (trainer/adamw.h).
  zero1_ = cfg_.parallel.zero1 && dp_ > 1;
  if (ctx_.dp && dp_ > 1)
    dp_sync_ = std::make_unique<DpGradSync>(
        *ctx_.dp, params_->grads_arena(), std::max<size_t>(1, static_cast<size_t>(cfg_.parallel.bucket_mb * (1 << 20))),
        zero1_ ? DpGradMode::kShardedMean : DpGradMode::kMean);
  overlap_ = dp_sync_ && cfg_.parallel.overlap_grad_sync;
  // Overlapped: as the last micro-batch's backward finishes a block's gradients, they are summed
  // over TP where partial and their DP buckets start; the same bits as syncing after the backward.
  if (overlap_)
    grads_ready_ = [this](int first, int end) {
      if (tp_ > 1) tp_sum_partial_grads(*ctx_.tp, *params_, first, end);
      dp_sync_->grads_ready(first, end);
    };
  opt_.emplace(*params_, AdamWConfig{tc_.beta1, tc_.beta2, tc_.eps, tc_.weight_decay},
               zero1_ ? dp_sync_.get() : nullptr);
  state_.rng_seed = tc_.seed;
  state_.rng_offset = 0;  // no random numbers are drawn after the init (no dropout)
}

// One training process per run directory; taken before a resumed run's checkpoint is read (which
// a running holder could prune meanwhile), and before anything is written.
void TrainRun::take_lock() {
  if (!writer_ || lock_) return;
  make_run_dir(dir_);
  lock_ = std::make_unique<RunLock>(summary_.run_dir);
}

void TrainRun::setup_resume() {
  if (options_.resume) {
    if (fs::is_directory(dir_)) take_lock();
    resume_ = find_resume_point(cfg_, summary_.run_dir, options_.resume_from);
    state_ = load_train_checkpoint(resume_.path, *params_, &*opt_);
    train_loader_->restore({state_.loader_epoch, state_.loader_position});
    summary_.resumed_from = resume_.path;
    summary_.start_step = static_cast<int>(state_.step);
    summary_.skipped_steps = static_cast<int>(state_.skipped_steps);
  }
}

std::vector<std::string> TrainRun::prepare_run_dir() {
  std::vector<std::string> notes;
  if (writer_) {
    take_lock();
    if (options_.resume) {
      notes = remove_partial_checkpoints(ckpt_dir_);
      time_offset_ = truncate_metrics(dir_ / "metrics.jsonl", resume_.state.step, notes);
    } else {
      notes = prepare_fresh_run_dir(summary_.run_dir, options_.overwrite);
    }
    write_resolved_config(dir_, cfg_);
  }
  return notes;
}

void TrainRun::open_reports(const std::vector<std::string>& notes) {
  // The other ranks write nowhere (metrics and log go to the null device).
  const std::string null_file = "/dev/null";
  metrics_.emplace(writer_ ? (dir_ / "metrics.jsonl").string() : null_file, /*append=*/options_.resume);
  std::FILE* console = writer_ ? options_.console : nullptr;
  bool tty = console && ::isatty(::fileno(console));
  log_.emplace(writer_ ? (dir_ / "log.txt").string() : null_file, console, tty, /*append=*/options_.resume);
  for (const std::string& n : notes) log_->print("note: " + n);

  log_->print(describe_device(runtime_.device(), cfg_.run.device));
  if (world_->size() > 1)
    log_->print(fmt::format("parallel: {} ranks = tp {} x dp {} ({} backend, collective timeout {:g} s); rank 0 "
                            "writes the run directory",
                            world_->size(), tp_, dp_, world_->backend(), world_->timeout_s()));
  if (dp_sync_) {
    // AdamW's two moments per parameter, in the parameters' dtype: 1/dp of them per rank under ZeRO-1.
    const double mib = 2.0 * static_cast<double>(params_->grads_arena().bytes()) / (1 << 20);
    log_->print(fmt::format("data parallel: {} gradient buckets of {} MiB, {}{}; optimizer state {:.1f} MiB per rank{}",
                            dp_sync_->num_buckets(), cfg_.parallel.bucket_mb,
                            zero1_ ? "reduce-scattered (ZeRO-1)" : "all-reduced",
                            overlap_ ? ", overlapped with the backward" : "",
                            zero1_ ? static_cast<double>(opt_->state().bytes()) / (1 << 20) : mib,
                            zero1_ ? fmt::format(" ({:.1f} MiB without ZeRO-1)", mib) : ""));
  } else if (cfg_.parallel.zero1) {
    log_->print("note: parallel.zero1 has no effect with one data-parallel rank");
  }
  int threads =
      cfg_.run.threads > 0 ? cfg_.run.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  openblas_set_num_threads(threads);

  if (options_.resume)
    log_->print(
        fmt::format("resuming from {} (step {}, {} tokens seen)", resume_.path, state_.step, state_.tokens_seen));
  log_->print(model_->summary());
  log_->print(fmt::format("data: {} train tokens ({} batches of {} x {} per epoch), {} validation tokens; {} steps of "
                          "{} x {} x {} tokens = {:.2f} epochs; {} threads; run directory {}",
                          train_loader_->tokens_in_shards(), train_loader_->batches_per_epoch(), B_, T_,
                          val_loader_ ? val_loader_->tokens_in_shards() : 0, tc_.steps, A_, B_ * dp_, T_,
                          static_cast<double>(tc_.steps) * A_ / train_loader_->batches_per_epoch(), threads,
                          summary_.run_dir));

  inputs_.resize(static_cast<size_t>(B_) * T_);
  targets_.resize(inputs_.size());
}

}  // namespace dt
