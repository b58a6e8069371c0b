// The subcommands of `deltatron`, one file each (apps/cmd_<name>.cpp).
// Each adds itself to the app; its callback throws dt::Error on bad input.
#pragma once

#include <CLI/CLI.hpp>

namespace dt {

void add_tokenize_commands(CLI::App& app);  // tokenize, detokenize (apps/cmd_tokenize.cpp)
void add_prepare_command(CLI::App& app);    // apps/cmd_prepare.cpp
void add_info_command(CLI::App& app);       // apps/cmd_info.cpp
void add_train_command(CLI::App& app);      // apps/cmd_train.cpp
void add_eval_command(CLI::App& app);       // apps/cmd_eval.cpp
void add_export_command(CLI::App& app);     // apps/cmd_export.cpp
void add_generate_command(CLI::App& app);   // apps/cmd_generate.cpp

}  // namespace dt
