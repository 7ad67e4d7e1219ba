#pragma once
// `oomguard run`: parse (harness/cli/main.cpp) -> app::resolve_run and app::execute_run ->
// the table -> the exit code.
#include "harness/app/run.h"

namespace CLI {
class App;
}  // namespace CLI

namespace oomguard::cli {

// `oomguard run`'s options: the application's run request.
using RunArgs = app::RunRequest;

// Declares `oomguard run`'s options on `app` (the run subcommand, or repeat's parser for its
// run options), filling `args` (harness/cli/main.cpp, the one file that compiles CLI11).
void add_run_options(CLI::App& app, RunArgs& args);

// The whole run: returns the exit code.
int run_command(const RunArgs& args);

}  // namespace oomguard::cli
