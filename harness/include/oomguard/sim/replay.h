#pragma once
// replay: a trace through the caching-allocator model for one card and setting.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <oomguard/memory/tag_bytes.h>
#include <oomguard/sim/caching_allocator.h>
#include <oomguard/sim/trace.h>

namespace oomguard::sim {

// Bytes requested by live allocations of one tag (the model part, or a snapshot's frame).
using TagBytes = memory::TagBytes;

// `bytes[t]` of the tags `names[t]` as live_at_peak lists them: the five largest (largest
// first, ties by index; an empty name as "(untagged)"), then the others summed as "(rest)";
// tags of 0 bytes are left out. `names` may be longer than `bytes`.
std::vector<TagBytes> top_tags(
    const std::vector<int64_t>& bytes, const std::vector<std::string>& names);

struct PhasePrediction {
  std::string name;
  int64_t peak_requested_bytes = 0;  // what the run asked for: its own meter's peak
  int64_t peak_allocated_bytes = 0;  // blocks handed out, rounding and slack included
  int64_t peak_reserved_bytes = 0;   // segments held: what must fit on the card
  int64_t largest_gap_bytes = 0;     // most reserved minus allocated as an alloc is served or fails
  int64_t num_alloc_retries = 0;
  // What was live when the phase's requested bytes peaked: the five largest tags, then the
  // rest in one entry; the bytes add up to peak_requested_bytes.
  std::vector<TagBytes> live_at_peak;
  size_t peak_event = 0;  // the event after which requested bytes peaked (its index)
};

struct PredictedOom {
  int64_t line = 0;  // the failing alloc event's line in the trace
  int64_t id = 0;
  int64_t bytes = 0;
  std::string phase;
  int64_t step = -1;
  std::string tag;
  OomInfo info;  // the segment it needed and LibTorch's message
};

// How the model followed a PyTorch snapshot's own timeline of reserved bytes.
struct RecordingMatch {
  int64_t allocations = 0;       // alloc events replayed
  int64_t reserved_matches = 0;  // after which the model reserved what the recording did
  struct Mismatch {
    int64_t line = 0;  // the alloc's entry in the device trace
    int64_t recorded_reserved_bytes = 0, modelled_reserved_bytes = 0;
  };
  std::optional<Mismatch> first_mismatch;
};

struct ReplayResult {
  std::vector<PhasePrediction> phases;  // in the order they ran
  int64_t peak_requested_bytes = 0;
  int64_t peak_allocated_bytes = 0;
  int64_t peak_reserved_bytes = 0;
  int64_t largest_gap_bytes = 0;  // fragmentation: reserved but unallocated, at an alloc
  int64_t largest_gap_line = 0;   // where in the trace it was largest
  int64_t num_alloc_retries = 0;
  int64_t num_ooms = 0;
  int64_t events = 0;                       // events replayed (the trace stops at an OOM)
  std::optional<PredictedOom> oom;          // the first allocation that would fail
  std::optional<RecordingMatch> recording;  // traces with recorded_reserved (snapshots)
  int64_t workspace_bytes = 0;              // the cuBLAS workspaces the gemm events took
};

// Memory after every replayed event, for pictures: requested[i] and reserved[i] follow
// trace.events[i].
struct Timeline {
  std::vector<int64_t> requested, reserved;
};

// What the modelled allocator did, as a PyTorch snapshot's device trace records it, and its
// segments at the end: the content of `--export-snapshot`.
struct DeviceTrace {
  struct Entry {
    enum class Action : uint8_t {
      kAlloc,
      kFreeRequested,
      kFreeCompleted,
      kSegmentAlloc,
      kSegmentFree,
      kOom
    };
    Action action = Action::kAlloc;
    int64_t address = 0, size = 0;
    size_t event = 0;  // the trace event it came from (its phase, step and tag)
  };
  std::vector<Entry> entries;
  std::vector<SegmentState> segments;
};

// Replays until the end or the first predicted OOM, as the real run would stop there;
// fills `timeline` and `device_trace` when given.
// `workspace_bytes` > 0: the trace's gemm events take a cuBLAS workspace of that size for
// their handle (forward, backward) the first time, kept to the end (the cublas_workspace rule;
// ReplayResult::workspace_bytes); a refused one is the replay's OOM (tag "cuBLAS workspace").
ReplayResult replay(
    const Trace& trace,
    const AllocatorSettings& settings,
    const DeviceLimits& device,
    Timeline* timeline = nullptr,
    DeviceTrace* device_trace = nullptr,
    int64_t workspace_bytes = 0);

}  // namespace oomguard::sim
