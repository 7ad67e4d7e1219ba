#pragma once
// Replay as an application step: an allocation trace (oomguard's JSON Lines, or a PyTorch
// memory snapshot pickle, told apart by content) through the CUDA caching-allocator model for
// each card and allocator setting asked for, and the oomguard.replay/1 report of it.
// Nothing is printed here. No Torch.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <oomguard/sim/caching_allocator.h>
#include <oomguard/sim/gpu_rules.h>
#include <oomguard/sim/replay.h>
#include <oomguard/sim/snapshot.h>
#include <oomguard/sim/trace.h>

namespace oomguard::app {

// `oomguard replay`'s options.
struct ReplayRequest {
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

// What `replay` and `plot` read: the trace, and for a snapshot its device and settings.
struct Input {
  sim::Trace trace;
  std::optional<sim::SnapshotInfo> snapshot;
};
// Reads a trace or a snapshot (told apart by content); throws UsageError when the file
// cannot be opened or is malformed, naming where.
Input read_input(const std::string& path);

// One replay's card and allocator settings.
struct Setting {
  std::string card;  // a card profile's name, or empty for --capacity
  sim::DeviceLimits device;
  std::string alloc_conf;
  sim::AllocatorSettings settings;
  sim::CublasWorkspace workspace;  // per handle, taken at the trace's gemm events; 0: none
  // "t4 expandable_segments:True", "512MiB default"
  std::string label() const;
};

struct Replays {
  Input input;
  std::string torch_version;  // the modelled allocator's, "2.15"
  std::vector<Setting> settings;
  std::vector<sim::ReplayResult> results;  // one per setting
  nlohmann::json report;                   // oomguard.replay/1
  double seconds = 0.0;                    // the replays' own time
  // A trace without gemm events replayed with a cuBLAS workspace rule: none was added.
  bool workspace_unused = false;
};

// Replays `request` (defaults: `build_torch_version` "X.Y" for the modelled allocator), writes
// its report and exported snapshot where asked. Throws UsageError naming a bad option or input.
Replays replay_settings(const ReplayRequest& request, const std::string& build_torch_version);

}  // namespace oomguard::app
