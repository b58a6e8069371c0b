// Whole training steps of a model from a config, on random tokens: forward, backward, gradient
// norm + clipping, fused AdamW -- what `deltatron train` does per step, without the data loader.
//   bench_train --config configs/softmax_124m.yaml [--set key=value ...] [--steps 20] [--warmup 5]
//               [--device auto|cpu|cuda] [--name NAME] [--json OUT.json]
// Prints the step time, tokens/s, MFU, peak memory, and the time of each phase (forward, backward,
// optimizer; measured in separate synchronised steps after the timed ones), and writes them as JSON.
//
// MFU counts model FLOPs per token (trainer/mfu.h) over the card's dense bf16 peak (--peak-tflops,
// 989 for H100/H200 SXM).
//
// Under mpirun (bench/bench_scaling.py runs it so) the world is tp x dp (--set parallel.tp=T; dp =
// ranks / T), each rank on its node-local GPU, each DP rank on its own random batch of
// train.batch_size sequences; a step is forward, backward, the TP sum of partial gradients, the DP
// mean, the TP-aware norm and clipping, AdamW. Rank 0 prints and writes the JSON; tokens/s counts
// every DP rank's tokens (dp x batch x seq_len per step), MFU is per GPU.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/device.h"
#include "core/peak_memory.h"
#include "core/philox.h"
#include "kernels/ops.h"
#include "layers/model.h"
#include "parallel/dp_grads.h"
#include "parallel/mpi_runtime.h"
#include "parallel/process_grid.h"
#include "parallel/process_groups.h"
#include "trainer/adamw.h"
#include "trainer/config.h"
#include "trainer/grad_sync.h"
#include "trainer/mfu.h"
#include "trainer/runtime.h"

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

int run(int argc, char** argv);

}  // namespace

int main(int argc, char** argv) {
  dt::MpiRuntime mpi;  // MPI_Init_thread when launched by mpirun; nothing in a plain run
  int rc = 0;
  dt::run_or_abort_job([&] { rc = run(argc, argv); });
  return rc;
}

namespace {

int run(int argc, char** argv) {
  CLI::App app{"Deltatron training-step benchmark"};
  std::string config_path, name, json_path, device = "auto";
  std::vector<std::string> sets;
  int steps = 20, warmup = 5;
  double peak_tflops = dt::kDefaultPeakTflops;
  app.add_option("--config", config_path, "YAML config (configs/softmax_124m.yaml, ...)")->required();
  app.add_option("--set", sets, "Override a key: --set model.tie_embeddings=true (repeatable)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--steps", steps, "Timed steps");
  app.add_option("--warmup", warmup, "Untimed steps first");
  app.add_option("--device", device, "auto, cpu or cuda");
  app.add_option("--name", name, "Name in the table and the JSON (default: the config's run.name)");
  app.add_option("--json", json_path, "Write the results here");
  app.add_option("--peak-tflops", peak_tflops, "Dense bf16 peak of the device, for MFU");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return dt::world_rank() == 0 ? app.exit(e) : (e.get_exit_code() == 0 ? 0 : 1);
  }

  try {
    const dt::Config cfg = dt::load_config(config_path, sets);
    if (name.empty()) name = cfg.run.name;
    const int B = cfg.train.batch_size, T = cfg.train.seq_len;
    dt::Runtime rt(dt::resolve_device(device));  // under mpirun: the GPU of the node-local rank
    dt::Context& ctx = rt.ctx();
    // The world (tp x dp, TP ranks adjacent) and its groups, as the trainer makes them.
    auto world = dt::make_communicator({.device = rt.device(), .cuda_device = ctx.device_index, .stream = ctx.stream});
    DT_CHECK(world->size() % cfg.parallel.tp == 0,
             "parallel.tp = {} does not divide the {} ranks launched; run `mpirun -np N` with N a multiple of it",
             cfg.parallel.tp, world->size());
    const dt::ProcessGrid grid(world->rank(), world->size(), cfg.parallel.tp);
    dt::ProcessGroups groups;
    if (world->size() > 1) {
      groups = dt::make_process_groups(*world, grid);
      ctx.tp = groups.tp.get();
      ctx.dp = groups.dp.get();
    }
    ctx.grid = &grid;
    const int tp = grid.tp_size(), dp = grid.dp_size();
    const bool printer = world->rank() == 0;
    auto barrier = [&] {
      rt.synchronize();
      world->barrier();
    };
    const size_t mem_before = dt::device_memory_used();
    dt::Model model(cfg.model, B, T, dt::DType::kF32, rt.device(), dt::TpLayout{grid.tp_rank(), tp});
    model.init(cfg.train.seed);
    dt::ParamStore& params = model.params();
    dt::AdamW opt(params, {cfg.train.beta1, cfg.train.beta2, cfg.train.eps, cfg.train.weight_decay});
    std::unique_ptr<dt::DpGradSync> dp_sync;
    if (ctx.dp && dp > 1) dp_sync = std::make_unique<dt::DpGradSync>(*ctx.dp, params.grads_arena());
    // Parameters of the whole model: split ones summed over TP, replicated ones once.
    int64_t split_numel = 0, replicated_numel = 0;
    for (const dt::ParamInfo& p : params.infos())
      (p.split == dt::TpSplit::kReplicated ? replicated_numel : split_numel) += p.shape.numel();
    const int64_t model_params = split_numel * tp + replicated_numel;
    if (printer) {
      std::printf("%s\n%s\n", dt::describe_device(rt.device(), device).c_str(), model.summary().c_str());
      if (world->size() > 1)
        std::printf("parallel: %d ranks = tp %d x dp %d (%s backend); %lld parameters in the model, %lld on rank 0\n",
                    world->size(), tp, dp, std::string(world->backend()).c_str(),
                    static_cast<long long>(model_params), static_cast<long long>(params.numel()));
    }

    // Random tokens, a fresh batch each step and DP rank (Philox: the same for every run).
    std::vector<int32_t> tokens(static_cast<size_t>(B) * T + 1);
    uint64_t batch_index = 0;
    auto next_batch = [&] {
      const uint64_t stream = batch_index * dp + grid.dp_rank();
      for (size_t i = 0; i < tokens.size(); ++i)
        tokens[i] = static_cast<int32_t>(dt::philox_uniform(1234, stream, i) * cfg.model.vocab_size) %
                    cfg.model.vocab_size;
      ++batch_index;
    };
    dt::PeakMemory mem_peak(rt.device());  // on the CPU: the process's peak resident set
    std::vector<double> losses;
    // What follows the backward in a step, as the trainer does it without the overlap: TP sum of
    // partial gradients, DP mean, norm and the clipping factor (returned: AdamW::step applies it).
    auto reduce_and_clip = [&] {
      if (tp > 1) dt::tp_sum_partial_grads(*ctx.tp, params, 0, params.size());
      if (dp_sync) dp_sync->all_reduce_mean();
      return tp > 1 ? dt::grad_clip_factor_tp(ctx, params, *ctx.tp, cfg.train.grad_clip).scale
                    : dt::grad_clip_factor(ctx, params, cfg.train.grad_clip).scale;
    };
    auto train_step = [&] {
      params.zero_grads();
      double loss = model.forward(ctx, tokens.data(), tokens.data() + 1);
      model.backward(ctx, 1.0);
      mem_peak.sample();
      const double grad_scale = reduce_and_clip();
      opt.step(ctx, cfg.train.lr, grad_scale);
      losses.push_back(loss);
    };
    for (int i = 0; i < warmup; ++i) {
      next_batch();
      train_step();
    }
    barrier();
    // Timed steps; the batches are made before the clock starts.
    std::vector<std::vector<int32_t>> batches;
    for (int i = 0; i < steps; ++i) {
      next_batch();
      batches.push_back(tokens);
    }
    const auto t0 = clock_type::now();
    for (int i = 0; i < steps; ++i) {
      tokens = batches[i];
      train_step();
    }
    barrier();  // the step time of the slowest rank
    const double step_s = seconds_since(t0) / steps;

    // Phases, each synchronised (so their sum exceeds the step a little).
    double fwd_s = 0, bwd_s = 0, opt_s = 0, bwd_enqueue_s = 0;
    const int phase_steps = std::max(3, steps / 4);
    for (int i = 0; i < phase_steps; ++i) {
      tokens = batches[i % batches.size()];
      params.zero_grads();
      barrier();
      auto t = clock_type::now();
      model.forward(ctx, tokens.data(), tokens.data() + 1);
      rt.synchronize();
      fwd_s += seconds_since(t);
      t = clock_type::now();
      model.backward(ctx, 1.0);
      bwd_enqueue_s += seconds_since(t);  // the host's time to launch it all (no sync inside)
      rt.synchronize();
      bwd_s += seconds_since(t);
      t = clock_type::now();
      const double grad_scale = reduce_and_clip();  // under TP / DP the gradient collectives count here
      opt.step(ctx, cfg.train.lr, grad_scale);
      rt.synchronize();
      opt_s += seconds_since(t);
    }
    fwd_s /= phase_steps, bwd_s /= phase_steps, opt_s /= phase_steps, bwd_enqueue_s /= phase_steps;

    // Every DP rank's tokens; the model FLOPs of a token are spread over its TP group (flops_per_token
    // counts this rank's part of the matmuls), so MFU is per GPU.
    const double tok_s = static_cast<double>(B) * T * dp / step_s;
    const double fpt = dt::model_flops_per_token(model, tp);
    const double mfu = dt::mfu(static_cast<double>(B) * T / step_s, fpt, peak_tflops);
    if (!printer) return 0;
    const double gib = 1024.0 * 1024.0 * 1024.0;
    std::printf("\n%-28s %10s %12s %8s %12s %12s | %8s %8s %8s\n", "model", "step ms", "tokens/s", "MFU",
                "peak GiB", "ours GiB", "fwd ms", "bwd ms", "opt ms");
    std::printf("%-28s %10.2f %12.0f %7.1f%% %12.2f %12.2f | %8.2f %8.2f %8.2f\n", name.c_str(), step_s * 1e3, tok_s,
                100 * mfu, mem_peak.bytes() / gib, (mem_peak.bytes() - mem_before) / gib, fwd_s * 1e3, bwd_s * 1e3, opt_s * 1e3);
    // When launching the backward takes the host much less than the GPU's time to run it, the GPU
    // never waits for a launch and a CUDA graph has nothing to win.
    if (rt.device() == dt::Device::kCUDA)
      std::printf("backward: the host launches it in %.2f ms, the GPU runs it in %.2f ms\n", bwd_enqueue_s * 1e3,
                  bwd_s * 1e3);
    std::printf("losses: first %.4f, last %.4f (random tokens: ln(V) = %.4f)\n", losses.front(), losses.back(),
                std::log(static_cast<double>(cfg.model.vocab_size)));
    if (!json_path.empty()) {
      nlohmann::ordered_json j = {{"name", name},
                                  {"config", config_path},
                                  {"sets", sets},
                                  {"device", dt::describe_device(rt.device(), device)},
                                  {"params", model_params},
                                  {"params_rank0", params.numel()},
                                  {"world", world->size()},
                                  {"tp", tp},
                                  {"dp", dp},
                                  {"batch", B},
                                  {"seq_len", T},
                                  {"steps", steps},
                                  {"step_ms", step_s * 1e3},
                                  {"tok_per_s", tok_s},
                                  {"tok_per_s_per_gpu", tok_s / world->size()},
                                  {"flops_per_token", fpt},
                                  {"mfu", mfu},
                                  {"peak_mem_gib", mem_peak.bytes() / gib},
                                  {"peak_mem_ours_gib", (mem_peak.bytes() - mem_before) / gib},
                                  {"forward_ms", fwd_s * 1e3},
                                  {"backward_ms", bwd_s * 1e3},
                                  {"optimizer_ms", opt_s * 1e3},
                                  {"backward_host_launch_ms", bwd_enqueue_s * 1e3},
                                  {"first_loss", losses.front()},
                                  {"last_loss", losses.back()}};
      std::ofstream(json_path) << j.dump(1) << "\n";
    }
  } catch (const std::exception& e) {
    if (dt::several_ranks()) throw;  // run_or_abort_job ends every rank with this one's message
    std::fprintf(stderr, "bench_train: error: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace
