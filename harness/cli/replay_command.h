#pragma once
// `oomguard replay`: an allocation trace (oomguard's JSON Lines, or a PyTorch memory
// snapshot pickle, told apart by content) through the CUDA caching-allocator model.
#include <optional>
#include <string>
#include <vector>

#include <oomguard/sim/snapshot.h>
#include <oomguard/sim/trace.h>

namespace CLI {
class App;
}  // namespace CLI

namespace oomguard::cli {

struct ReplayArgs {
  std::string trace_file, report_file;
  std::string export_snapshot;  // write the (first) replay as a PyTorch memory snapshot here
  // Each card and capacity with each allocator setting is one replay; several make a table
  // side by side. No --alloc-conf: the default, or the settings a snapshot was recorded with.
  std::vector<std::string> cards, capacities, alloc_confs;
  std::string torch_version;  // X.Y of the allocator to model; empty: this build's LibTorch
  // The CPU-to-GPU rules a trace of oomguard's is replayed with (sim::GpuRules): its gemm
  // events take the card's cuBLAS workspaces. A PyTorch snapshot has them already.
  std::string rules = "all";
};

// Declares `oomguard replay`'s options on `app`, filling `args` (harness/cli/main.cpp, the one
// file that compiles CLI11).
void add_replay_options(CLI::App& app, ReplayArgs& args);

// What `replay` and `plot` read: the trace, and for a snapshot its device and settings.
struct Input {
  sim::Trace trace;
  std::optional<sim::SnapshotInfo> snapshot;
};
// Reads a trace or a snapshot (told apart by content); throws UsageError when the file
// cannot be opened, sim::TraceError (a SnapshotError for snapshots) when it is malformed.
Input read_input(const std::string& path);

// Returns the exit code: 0 if the trace fits with every setting, 3 on a predicted OOM.
int replay_command(const ReplayArgs& args);

}  // namespace oomguard::cli
