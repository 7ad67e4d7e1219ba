#pragma once
// `oomguard run --snapshot` on CPU (or Meta): the run's trace replayed through the
// caching-allocator model and written as a PyTorch memory snapshot. (On CUDA the snapshot is
// PyTorch's own, recorded by the CUDA meter.) Used by harness/app/run.cpp and run_outputs.cpp.
// No Torch.
#include <string>

#include <oomguard/sim/alloc_conf.h>
#include <oomguard/sim/caching_allocator.h>
#include <oomguard/sim/gpu_rules.h>

namespace oomguard::app {

// What the replay takes: the settings of memory.alloc_conf (`alloc_conf`) and the card's cuBLAS
// workspaces, which the replay adds where the trace marks its matrix products, as a CUDA
// snapshot shows them.
struct SnapshotReplay {
  std::string alloc_conf;
  sim::AllocatorSettings settings;
  sim::CublasWorkspace workspace;
};

// The replay of a run on `card` (--card; "": the allocator model's default sm) with
// memory.alloc_conf `alloc_conf`, its workspaces by `rules` (--rules), for LibTorch `torch`.
// Throws UsageError "--snapshot: ..." where it cannot be written (expandable segments).
SnapshotReplay snapshot_replay(
    const std::string& alloc_conf,
    const std::string& card,
    const std::string& rules,
    sim::TorchVersion torch);

// The trace at `trace_path` replayed as `replay` says on `device` and written to
// `snapshot_file`; the trace is removed after unless `keep_trace` (it was asked for, --trace).
void write_snapshot(
    const std::string& trace_path,
    bool keep_trace,
    const std::string& snapshot_file,
    const SnapshotReplay& replay,
    const sim::DeviceLimits& device);

}  // namespace oomguard::app
