#pragma once
// The observers of sim::replay's one pass over a trace: each sees the events it needs and
// fills one output (the timeline, the device trace, the match with a recording). Used by
// harness/sim/replay.cpp alone.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include <oomguard/sim/replay.h>

namespace oomguard::sim::replay_observers {

using Action = DeviceTrace::Entry::Action;
using Handle = CachingAllocator::Handle;

// Memory after every replayed event, for pictures (Timeline); `timeline` may be nullptr.
class TimelineRecorder {
 public:
  TimelineRecorder(Timeline* timeline, const AllocatorStats& stats)
      : timeline_(timeline), stats_(stats) {}

  // Event `index` begins: the previous event's outcome is final.
  void event_begins(size_t index) {
    if (timeline_ != nullptr && index > 0)
      record();
  }
  // After `events` replayed events: the last event's outcome (an OOM changes nothing).
  void finish(int64_t events) {
    if (timeline_ != nullptr && events > 0)
      record();
  }

 private:
  void record() {
    timeline_->requested.push_back(stats_.requested_bytes.current);
    timeline_->reserved.push_back(stats_.reserved_bytes.current);
  }

  Timeline* timeline_;
  const AllocatorStats& stats_;
};

// What the allocator did, as a PyTorch snapshot's device trace records it (DeviceTrace): each
// block call as entries of its trace event, after the segments the call took or gave back.
// `device_trace` may be nullptr. Made after the initial segments are adopted (they are no
// entries); it logs the allocator's segments until finish().
class DeviceTraceRecorder {
 public:
  DeviceTraceRecorder(DeviceTrace* device_trace, CachingAllocator& allocator, const Trace& trace)
      : device_trace_(device_trace), allocator_(allocator) {
    if (device_trace_ == nullptr)
      return;
    allocator_.log_segments(&segment_events_);
    slot_bytes_.resize(static_cast<size_t>(trace.slots));
    for (const InitialSegment& s : trace.initial_segments)
      for (size_t i = 0; i < s.live.size(); ++i)
        slot_bytes_[static_cast<size_t>(s.slots[i])] = s.live[i].requested;
  }
  DeviceTraceRecorder(const DeviceTraceRecorder&) = delete;  // the allocator logs into it
  DeviceTraceRecorder& operator=(const DeviceTraceRecorder&) = delete;

  // Event `index` is about to free `block` of allocation `slot`.
  void freeing(size_t index, int32_t slot, Handle block) {
    if (device_trace_ == nullptr || block < 0)
      return;
    const int64_t address = allocator_.block_address(block);
    const int64_t size = slot_bytes_[static_cast<size_t>(slot)];
    record(index, Action::kFreeRequested, address, size);
    record(index, Action::kFreeCompleted, address, size);
  }
  // Event `index` emptied the cache.
  void emptied(size_t index) {
    if (device_trace_ != nullptr)
      record_segments(index);
  }
  // Event `index`, a gemm, asked for a cuBLAS workspace of `bytes` and got `block` (or kOom).
  void workspace(size_t index, Handle block, int64_t bytes) {
    if (device_trace_ != nullptr)
      served(index, block, bytes);
  }
  // Event `index` asked for `bytes` for allocation `slot` and got `block` (kOom, kEmpty).
  void allocated(size_t index, int32_t slot, Handle block, int64_t bytes) {
    if (device_trace_ == nullptr || block == CachingAllocator::kEmpty)
      return;
    slot_bytes_[static_cast<size_t>(slot)] = bytes;
    served(index, block, bytes);
  }
  // The segments at the end; the allocator stops logging.
  void finish() {
    if (device_trace_ == nullptr)
      return;
    device_trace_->segments = allocator_.segments();
    allocator_.log_segments(nullptr);
  }

 private:
  void served(size_t index, Handle block, int64_t bytes) {
    if (block == CachingAllocator::kOom)
      record(index, Action::kOom, 0, bytes);
    else
      record(index, Action::kAlloc, allocator_.block_address(block), bytes);
  }
  // The segments the last call took or gave back, as entries of event `index`.
  void record_segments(size_t index) {
    for (const SegmentEvent& s : segment_events_)
      device_trace_->entries.push_back(
          {s.alloc ? Action::kSegmentAlloc : Action::kSegmentFree, s.address, s.size, index});
    segment_events_.clear();
  }
  // Those, then `action` itself.
  void record(size_t index, Action action, int64_t address, int64_t size) {
    record_segments(index);
    device_trace_->entries.push_back({action, address, size, index});
  }

  DeviceTrace* device_trace_;
  CachingAllocator& allocator_;
  std::vector<SegmentEvent> segment_events_;
  std::vector<int64_t> slot_bytes_;  // per slot: the bytes its allocation requested
};

// How the model follows a PyTorch snapshot's own reserved bytes (RecordingMatch): compared
// after every allocation served. Nothing for a trace without recorded_reserved.
class RecordingMatcher {
 public:
  RecordingMatcher(const Trace& trace, std::optional<RecordingMatch>& match)
      : recorded_reserved_(trace.recorded_reserved), match_(match) {
    if (!recorded_reserved_.empty())
      match_.emplace();
  }

  // Alloc event `index` (at `line`) was served; the model reserves `reserved` bytes now.
  void allocated(size_t index, int64_t line, int64_t reserved) {
    if (!match_)
      return;
    RecordingMatch& m = *match_;
    const int64_t recorded = recorded_reserved_[index];
    ++m.allocations;
    if (recorded == reserved)
      ++m.reserved_matches;
    else if (!m.first_mismatch)
      m.first_mismatch = RecordingMatch::Mismatch{line, recorded, reserved};
  }

 private:
  const std::vector<int64_t>& recorded_reserved_;
  std::optional<RecordingMatch>& match_;
};

}  // namespace oomguard::sim::replay_observers
