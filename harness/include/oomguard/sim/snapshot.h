#pragma once
// PyTorch memory snapshots as traces: what torch.cuda.memory._dump_snapshot() (Python) and
// torch::cuda::_memory_snapshot_pickled() (LibTorch) write after
// _record_memory_history(), read for `oomguard replay`.
//
// The allocator's state when recording began is rebuilt from the snapshot's `segments` (its
// state at the end) and the device trace: segments held before the first entry (still there
// at the end without a recorded segment_alloc, or freed by a recorded segment_free without
// one), blocks live then (freed in the trace without a recorded alloc, or live at the end and
// never in the trace). The trace's alloc / free_requested entries become the events; a run of
// segment_free entries that no allocation follows is torch.cuda.empty_cache(). The
// recording's own reserved bytes after each entry (segment_alloc / segment_free) come along,
// so a replay can say where the model follows the real allocator.
#include <cstdint>
#include <string>
#include <string_view>

#include <oomguard/sim/trace.h>

namespace oomguard::sim {

// A snapshot the model cannot replay, or a malformed one: what() names the file and why.
class SnapshotError : public TraceError {
 public:
  using TraceError::TraceError;
};

struct SnapshotInfo {
  int64_t device = 0;      // the CUDA device whose trace is replayed
  int64_t entries = 0;     // entries in that device trace
  std::string alloc_conf;  // the allocator settings it was recorded with, if it says
  bool alloc_conf_recorded = false;
};

// Reads the snapshot pickle `bytes` (named `source` in errors). Throws SnapshotError for a
// malformed pickle (naming the byte offset), for what is not a memory snapshot, and for what
// the model cannot replay: events on several devices or streams, private memory pools (CUDA
// graphs), expandable segments.
Trace read_snapshot(std::string_view bytes, const std::string& source, SnapshotInfo& info);

}  // namespace oomguard::sim
