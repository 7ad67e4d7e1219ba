#include "harness/app/run_snapshot.h"

#include <cstdio>
#include <fstream>
#include <stdexcept>

#include "harness/app/inputs.h"
#include "harness/atomic_file.h"
#include "harness/log.h"
#include "harness/usage_error.h"
#include <oomguard/memory/cards.h>
#include <oomguard/memory/sizes.h>
#include <oomguard/sim/replay.h>
#include <oomguard/sim/snapshot_export.h>
#include <oomguard/sim/trace.h>

namespace oomguard::app {

SnapshotReplay snapshot_replay(
    const std::string& alloc_conf,
    const std::string& card,
    const std::string& rules,
    sim::TorchVersion torch) {
  SnapshotReplay replay;
  replay.alloc_conf = alloc_conf;
  try {
    replay.settings = sim::AllocatorSettings::parse(alloc_conf, torch.number());
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--snapshot: ") + e.what());
  }
  if (replay.settings.expandable_segments)
    throw UsageError(
        "--snapshot: memory.alloc_conf has expandable_segments:True, whose pages are not "
        "segments of their own; a snapshot is written for the other settings");
  const int sm =
      card.empty() ? memory::kDefaultModelSm : memory::find_card(card).compute_capability;
  try {
    replay.workspace = sim::cublas_workspace_rule(sm, torch, rules_option(rules));
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--snapshot: ") + e.what());
  }
  return replay;
}

void write_snapshot(
    const std::string& trace_path,
    bool keep_trace,
    const std::string& snapshot_file,
    const SnapshotReplay& replay,
    const sim::DeviceLimits& device) {
  std::ifstream in(trace_path);
  const sim::Trace trace = sim::read_trace(in, trace_path);
  in.close();
  if (!keep_trace)
    std::remove(trace_path.c_str());
  sim::DeviceTrace device_trace;
  const sim::ReplayResult r = sim::replay(
      trace, replay.settings, device, nullptr, &device_trace, replay.workspace.bytes_per_handle);
  write_file_atomically(
      snapshot_file,
      sim::snapshot_pickle(trace, device_trace, replay.alloc_conf, /*expandable_segments=*/false));
  log::info(
      "snapshot: " + std::to_string(device_trace.entries.size()) + " entries, " +
      std::to_string(device_trace.segments.size()) + " segments, reserved peak " +
      memory::format_size(r.peak_reserved_bytes) + " in " + snapshot_file +
      "; python -m torch.cuda._memory_viz trace " + snapshot_file + " reads it");
}

}  // namespace oomguard::app
