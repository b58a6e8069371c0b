// `deltatron eval --checkpoint FILE [--data GLOB] [--batches N] [--json]`: the validation loss of a
// checkpoint (trainer/evaluate.h), with the model built from the checkpoint's own config.
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "core/error.h"
#include "trainer/evaluate.h"

namespace dt {

namespace {

struct EvalArgs {
  std::string checkpoint;
  std::string data;
  long long batches = 0;
  int threads = 0;
  bool json = false;
  std::string device = "auto";
};

}  // namespace

void add_eval_command(CLI::App& app) {
  auto args = std::make_shared<EvalArgs>();
  CLI::App* cmd = app.add_subcommand("eval", "Validation loss of a checkpoint");
  cmd->footer(
      "The model is built from the config stored in the checkpoint and evaluated in batches of its\n"
      "train.batch_size x train.seq_len, from the start of the data, so the value equals the run's val_loss\n"
      "at that step. Example: deltatron eval --checkpoint runs/quickstart/checkpoints/step_00000150.h5 --json\n");
  cmd->add_option("--checkpoint", args->checkpoint, "Checkpoint file (<run dir>/checkpoints/step_*.h5)");
  cmd->add_option("--data", args->data, "Glob of token shards (default: the checkpoint config's data.val)");
  CLI::Option* batches = cmd->add_option("--batches", args->batches,
                  "Batches to evaluate (default: the config's train.eval_batches; at most one pass over the data)");
  cmd->add_option("--threads", args->threads, "OpenBLAS threads (default: the config's run.threads; 0: all cores)");
  cmd->add_option("--device", args->device, "auto (the GPU when there is one), cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  cmd->add_flag("--json", args->json, "Print the result as one JSON object on stdout");
  cmd->callback([args, batches] {
    DT_CHECK(!args->checkpoint.empty(), "eval needs --checkpoint FILE, e.g. --checkpoint "
             "runs/quickstart/checkpoints/step_00000150.h5");
    DT_CHECK(batches->count() == 0 || args->batches >= 1, "--batches = {}: give a number of batches >= 1",
             args->batches);
    DT_CHECK(args->threads >= 0, "--threads = {}: give a thread count >= 1 (0: all cores)", args->threads);
    CheckpointEvalOptions options;
    options.data = args->data;
    options.batches = args->batches;
    options.threads = args->threads;
    options.device = args->device;
    CheckpointEval r = evaluate_checkpoint(args->checkpoint, options);
    if (!r.note.empty()) std::fprintf(stderr, "note: %s\n", r.note.c_str());
    std::fprintf(stderr, "%s\n", r.device.c_str());
    if (args->json) {
      nlohmann::ordered_json j = {{"checkpoint", r.checkpoint}, {"step", r.step},       {"val_loss", r.val_loss},
                                  {"data", r.data},             {"batches", r.batches}, {"batch_size", r.batch_size},
                                  {"seq_len", r.seq_len},       {"tokens", r.tokens}};
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf("checkpoint %s (step %lld): val_loss %.6f over %lld batches of %d x %d (%lld tokens) from %s\n",
                  r.checkpoint.c_str(), static_cast<long long>(r.step), r.val_loss, static_cast<long long>(r.batches),
                  r.batch_size, r.seq_len, static_cast<long long>(r.tokens), r.data.c_str());
    }
  });
}

}  // namespace dt
