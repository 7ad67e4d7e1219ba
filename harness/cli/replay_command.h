#pragma once
// `oomguard replay`: an allocation trace through the CUDA caching-allocator model.
#include <string>

#include <CLI/CLI.hpp>

namespace oomguard::cli {

struct ReplayArgs {
  std::string trace_file, card, capacity, alloc_conf, report_file;
  std::string torch_version;  // X.Y of the allocator to model; empty: this build's LibTorch
};

void add_replay_options(CLI::App& app, ReplayArgs& args);

// Returns the exit code: 0 if the trace fits, 3 on a predicted OOM.
int replay_command(const ReplayArgs& args);

}  // namespace oomguard::cli
