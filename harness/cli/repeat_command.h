#pragma once
// `oomguard repeat` (N seeded runs, each its own process) and `oomguard merge` (shards -> one).
#include <cstdint>
#include <string>
#include <vector>

#include "harness/app/repeat.h"
#include "harness/cli/run_command.h"

namespace oomguard::cli {

// `oomguard repeat`'s options: the application's repeat request.
using RepeatArgs = app::RepeatRequest;

// Declare `oomguard repeat`'s and `oomguard merge`'s options on `app`, filling `args`
// (harness/cli/main.cpp, the one file that compiles CLI11).
void add_repeat_options(CLI::App& app, RepeatArgs& args);
struct MergeArgs;
void add_merge_options(CLI::App& app, MergeArgs& args);

// Parses the run options repeat passes on, exactly as `run` would, refusing those that belong
// to repeat (--seed, --report, ...) or would have every run write one file; throws
// UsageError naming what is wrong (harness/cli/main.cpp).
RunArgs parse_run_args(const std::vector<std::string>& run_args);

// `program` is how oomguard was invoked (argv[0]), for the reproduce commands.
int repeat_command(const RepeatArgs& args, const std::string& program);

struct MergeArgs {
  std::vector<std::string> files;
  std::string report_file, junit_file;
};
int merge_command(const MergeArgs& args);

}  // namespace oomguard::cli
