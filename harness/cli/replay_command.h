#pragma once
// `oomguard replay`: an allocation trace (oomguard's JSON Lines, or a PyTorch memory
// snapshot pickle, told apart by content) through the CUDA caching-allocator model.
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace oomguard::cli {

struct ReplayArgs {
  std::string trace_file, card, capacity, report_file;
  std::vector<std::string> alloc_conf;  // at most one; none: the default, or a snapshot's own
  std::string torch_version;  // X.Y of the allocator to model; empty: this build's LibTorch
};

void add_replay_options(CLI::App& app, ReplayArgs& args);

// Returns the exit code: 0 if the trace fits, 3 on a predicted OOM.
int replay_command(const ReplayArgs& args);

}  // namespace oomguard::cli
