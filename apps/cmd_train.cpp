// `deltatron train`: trains a model from a YAML config (trainer/config.h, docs/config.md).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "core/error.h"
#include "trainer/config.h"
#include "trainer/train.h"

namespace dt {

namespace {

struct TrainArgs {
  std::string config_path;
  std::vector<std::string> sets;
  std::string run_dir;
  bool overwrite = false;
  bool print_config = false;
};

}  // namespace

void add_train_command(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand("train", "Train a model from a YAML config");
  cmd->footer(
      "The run directory (run.dir/run.name, or --run-dir) gets config.yaml (the resolved config), metrics.jsonl\n"
      "(one JSON object per step and per evaluation) and log.txt. Every key and its default: docs/config.md, or\n"
      "`deltatron train --print-config`.\n"
      "Example: deltatron train --config configs/quickstart.yaml --set train.steps=50 --overwrite\n");
  cmd->add_option("--config", args->config_path, "YAML config file (configs/quickstart.yaml, ...)");
  cmd->add_option("--set", args->sets,
                  "Override a key after the file is read: --set train.lr=3e-4 (repeatable; values are YAML)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--run-dir", args->run_dir, "Run directory (default: run.dir/run.name)");
  cmd->add_flag("--overwrite", args->overwrite, "Replace the metrics of an earlier run in the run directory");
  cmd->add_flag("--print-config", args->print_config,
                "Print the resolved config (the defaults without --config) as YAML and exit");
  cmd->callback([args] {
    if (args->print_config) {
      Config c = args->config_path.empty() ? parse_config("", args->sets, "--set") : load_config(args->config_path, args->sets);
      std::fputs(config_to_yaml(c).c_str(), stdout);
      return;
    }
    DT_CHECK(!args->config_path.empty(),
             "train needs --config FILE, e.g. --config configs/quickstart.yaml (`deltatron train --print-config` "
             "shows every key and its default)");
    Config c = load_config(args->config_path, args->sets);
    TrainOptions options;
    options.run_dir = args->run_dir;
    options.overwrite = args->overwrite;
    train(c, options);
  });
}

}  // namespace dt
