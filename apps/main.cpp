// deltatron: one program with subcommands (docs/architecture.md, "The command line").
#include <cstdio>
#include <exception>
#include <string>

#include "apps/commands.h"
#include "core/error.h"
#include "parallel/mpi_runtime.h"

int main(int argc, char** argv) {
  // MPI_Init when a launcher (mpirun -np N) started this process, else nothing: `deltatron train`
  // then trains on every rank (apps/cmd_train.cpp); every other command runs as usual.
  dt::MpiRuntime mpi;
  CLI::App app{"Deltatron: hybrid Gated DeltaNet / softmax-attention language models", "deltatron"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "deltatron 0.1.0");
  // (subcommands begin)
  dt::add_prepare_command(app);
  dt::add_info_command(app);
  dt::add_train_command(app);
  dt::add_eval_command(app);
  dt::add_export_command(app);
  dt::add_generate_command(app);
  dt::add_tokenize_commands(app);
  // (subcommands end)
  try {
    if (argc > 1 && argv[1][0] != '-') {  // name the unknown command, rather than "a subcommand is required"
      std::string commands;
      bool known = false;
      for (const CLI::App* sub : app.get_subcommands({})) {
        known = known || sub->get_name() == argv[1];
        commands += (commands.empty() ? "" : ", ") + sub->get_name();
      }
      DT_CHECK(known, "unknown command '{}'; the commands are: {}", argv[1], commands);
    }
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // A bad flag or argument: the same `deltatron: error:` form and exit code as every other error.
    std::fprintf(stderr, "deltatron: error: %s\nRun `deltatron --help` (or `deltatron <command> --help`) for usage.\n",
                 e.what());
    return 1;
  } catch (const dt::Error& e) {
    std::fprintf(stderr, "deltatron: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "deltatron: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
