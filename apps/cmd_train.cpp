// `deltatron train`: trains a model from a YAML config (trainer/config.h, docs/config.md), or
// continues a run from a checkpoint (--resume).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "core/error.h"
#include "parallel/mpi_runtime.h"
#include "trainer/config.h"
#include "trainer/runtime.h"
#include "trainer/train.h"
#include "trainer/train_checkpoint.h"

namespace dt {

namespace {

struct TrainArgs {
  std::string config_path;
  std::vector<std::string> sets;
  std::string run_dir;
  std::string resume_from;
  bool overwrite = false;
  bool print_config = false;
  std::string device;
};

// The config of a `--resume` given without --config: the one stored in the checkpoint, with --set applied.
Config config_of_checkpoint(const std::string& path, const std::vector<std::string>& sets) {
  CheckpointState state = checkpoint_read_state(path);
  return parse_config(state.config_yaml, sets, "the config stored in checkpoint " + path);
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand("train", "Train a model from a YAML config, or resume a run from a checkpoint");
  cmd->footer(
      "The run directory (run.dir/run.name, or --run-dir) gets config.yaml (the resolved config), metrics.jsonl\n"
      "(one JSON object per step and per evaluation), log.txt and, with train.checkpoint_every, checkpoints/.\n"
      "Every key and its default: docs/config.md, or `deltatron train --print-config`.\n"
      "--resume continues from the newest checkpoint in the run directory (--resume FILE: from that file); the\n"
      "model, data and train keys must match the checkpoint's except train.steps (so a run can be extended) and\n"
      "the evaluation/checkpoint settings. Without --config the checkpoint's own config is used.\n"
      "Under `mpirun -np N` it trains on N ranks: parallel.tp ranks split each layer by head, N / tp replicas\n"
      "split the data (train.batch_size is per replica); rank 0 writes the run directory.\n"
      "Example: deltatron train --config configs/quickstart.yaml --set train.steps=50 --overwrite\n"
      "         deltatron train --config configs/quickstart.yaml --resume\n");
  cmd->add_option("--config", args->config_path, "YAML config file (configs/quickstart.yaml, ...)");
  cmd->add_option("--set", args->sets,
                  "Override a key after the file is read: --set train.lr=3e-4 (repeatable; values are YAML)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  CLI::Option* run_dir = cmd->add_option("--run-dir", args->run_dir, "Run directory (default: run.dir/run.name)");
  CLI::Option* resume = cmd->add_option("--resume", args->resume_from,
                                        "Continue from the newest checkpoint in the run directory, or from FILE")
                            ->expected(0, 1)
                            ->type_name("[FILE]");
  cmd->add_option("--device", args->device, "auto (the GPU when there is one), cpu or cuda; sets run.device")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  cmd->add_flag("--overwrite", args->overwrite,
                "Replace an earlier run in the run directory (its metrics; its checkpoints are deleted)");
  cmd->add_flag("--print-config", args->print_config,
                "Print the resolved config (the defaults without --config) as YAML and exit");
  cmd->callback([args, resume, run_dir] {
    const bool resuming = resume->count() > 0;
    DT_CHECK(run_dir->count() == 0 || !args->run_dir.empty(),
             "--run-dir is empty; give the run directory (--run-dir runs/my_run), or leave the flag out to use "
             "run.dir/run.name");
    if (!args->device.empty()) args->sets.push_back("run.device=" + args->device);
    if (args->print_config) {
      Config c = args->config_path.empty() ? parse_config("", args->sets, "--set") : load_config(args->config_path, args->sets);
      std::fputs(config_to_yaml(c).c_str(), stdout);
      return;
    }
    TrainOptions options;
    options.run_dir = args->run_dir;
    options.overwrite = args->overwrite;
    options.resume = resuming;
    options.resume_from = args->resume_from;
    Config c;
    if (!args->config_path.empty()) {
      c = load_config(args->config_path, args->sets);
    } else {
      DT_CHECK(resuming,
               "train needs --config FILE, e.g. --config configs/quickstart.yaml (`deltatron train --print-config` "
               "shows every key and its default)");
      DT_CHECK(!args->resume_from.empty() || !args->run_dir.empty(),
               "--resume without --config needs the run directory (--run-dir DIR) or a checkpoint (--resume FILE)");
      std::string path = args->resume_from.empty() ? find_resume_checkpoint(args->run_dir) : args->resume_from;
      c = config_of_checkpoint(path, args->sets);
      options.resume_from = path;
    }
    // Under mpirun an error on one rank ends every rank at once with its message.
    run_or_abort_job([&] { train(c, options); });
  });
}

}  // namespace dt
