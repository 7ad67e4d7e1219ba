#pragma once
// `oomguard replay`: parse (harness/cli/main.cpp) -> app::replay_settings -> the table or the
// settings side by side -> the exit code.
#include "harness/app/replay.h"

namespace CLI {
class App;
}  // namespace CLI

namespace oomguard::cli {

// `oomguard replay`'s options: the application's replay request.
using ReplayArgs = app::ReplayRequest;

// Declares `oomguard replay`'s options on `app`, filling `args` (harness/cli/main.cpp, the one
// file that compiles CLI11).
void add_replay_options(CLI::App& app, ReplayArgs& args);

// Returns the exit code: 0 if the trace fits with every setting, 3 on a predicted OOM.
int replay_command(const ReplayArgs& args);

}  // namespace oomguard::cli
