#include <oomguard/sim/replay.h>

#include <algorithm>

namespace oomguard::sim {
namespace {

void close_phase(PhasePrediction& p, const CachingAllocator& allocator, int64_t retries_before) {
  const AllocatorStats& s = allocator.stats();
  p.peak_requested_bytes = s.requested_bytes.peak;
  p.peak_allocated_bytes = s.allocated_bytes.peak;
  p.peak_reserved_bytes = s.reserved_bytes.peak;
  p.num_alloc_retries = s.num_alloc_retries - retries_before;
}

constexpr size_t kTopTags = 5;

// live_at_peak of every phase: the trace walked again up to each phase's peak (an event
// index), counting requested bytes per tag; cheaper than copying the counts at every new peak.
void fill_live_at_peak(
    const Trace& trace,
    const std::vector<size_t>& peak_index,
    std::vector<PhasePrediction>& phases,
    int64_t workspace_bytes) {
  // The cuBLAS workspaces the gemm events took count under a name of their own, last.
  std::vector<std::string> names = trace.tags;
  names.push_back("cuBLAS workspace");
  const size_t workspace_tag = names.size() - 1;
  bool workspace_taken[2] = {false, false};
  std::vector<int64_t> by_tag(names.size(), 0);
  std::vector<int32_t> slot_tag(static_cast<size_t>(trace.slots), 0);
  std::vector<int64_t> slot_bytes(static_cast<size_t>(trace.slots), 0);
  for (const InitialSegment& s : trace.initial_segments)
    for (size_t i = 0; i < s.live.size(); ++i) {
      slot_bytes[static_cast<size_t>(s.slots[i])] = s.live[i].requested;
      by_tag[0] += s.live[i].requested;
    }
  size_t next = 0;  // the phase whose peak comes next
  for (size_t index = 0; index < trace.events.size() && next < phases.size(); ++index) {
    const TraceEvent& e = trace.events[index];
    const auto slot = static_cast<size_t>(e.slot);
    if (e.op == TraceEvent::Op::kAlloc) {
      slot_tag[slot] = e.tag;
      slot_bytes[slot] = e.bytes;
      by_tag[static_cast<size_t>(e.tag)] += e.bytes;
    } else if (e.op == TraceEvent::Op::kFree) {
      by_tag[static_cast<size_t>(slot_tag[slot])] -= slot_bytes[slot];
      slot_bytes[slot] = 0;
    } else if (
        e.op == TraceEvent::Op::kGemm && workspace_bytes > 0 &&
        !workspace_taken[e.backward ? 1 : 0]) {
      workspace_taken[e.backward ? 1 : 0] = true;
      by_tag[workspace_tag] += workspace_bytes;
    }
    for (; next < phases.size() && peak_index[next] == index; ++next)
      phases[next].live_at_peak = top_tags(by_tag, names);
  }
}

}  // namespace

std::vector<TagBytes> top_tags(
    const std::vector<int64_t>& bytes, const std::vector<std::string>& names) {
  std::vector<size_t> order;
  for (size_t t = 0; t < bytes.size(); ++t)
    if (bytes[t] > 0)
      order.push_back(t);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return bytes[a] != bytes[b] ? bytes[a] > bytes[b] : a < b;
  });
  std::vector<TagBytes> top;
  int64_t rest = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    if (k < kTopTags)
      top.push_back({names[order[k]].empty() ? "(untagged)" : names[order[k]], bytes[order[k]]});
    else
      rest += bytes[order[k]];
  }
  if (rest > 0)
    top.push_back({"(rest)", rest});
  return top;
}

ReplayResult replay(
    const Trace& trace,
    const AllocatorSettings& settings,
    const DeviceLimits& device,
    Timeline* timeline,
    DeviceTrace* device_trace,
    int64_t workspace_bytes) {
  ReplayResult result;
  CachingAllocator allocator(settings, device);
  std::vector<CachingAllocator::Handle> blocks(static_cast<size_t>(trace.slots));
  PhasePrediction* phase = nullptr;
  int64_t retries_before = 0;
  const AllocatorStats& stats = allocator.stats();
  for (const InitialSegment& s : trace.initial_segments) {
    const auto handles = allocator.adopt_segment(s.address, s.size, s.small, s.live);
    for (size_t i = 0; i < handles.size(); ++i)
      blocks[static_cast<size_t>(s.slots[i])] = handles[i];
  }
  if (!trace.recorded_reserved.empty())
    result.recording.emplace();
  using Action = DeviceTrace::Entry::Action;
  std::vector<SegmentEvent> segment_events;
  std::vector<int64_t> slot_bytes;
  if (device_trace != nullptr) {
    allocator.log_segments(&segment_events);
    slot_bytes.resize(blocks.size());
    for (const InitialSegment& s : trace.initial_segments)
      for (size_t i = 0; i < s.live.size(); ++i)
        slot_bytes[static_cast<size_t>(s.slots[i])] = s.live[i].requested;
  }
  // The segments the last call took or gave back, as entries of event `index`.
  const auto record_segments = [&](size_t index) {
    for (const SegmentEvent& s : segment_events)
      device_trace->entries.push_back(
          {s.alloc ? Action::kSegmentAlloc : Action::kSegmentFree, s.address, s.size, index});
    segment_events.clear();
  };
  // Those, then `action` itself.
  const auto record = [&](size_t index, Action action, int64_t address, int64_t size) {
    record_segments(index);
    device_trace->entries.push_back({action, address, size, index});
  };
  bool workspace_taken[2] = {false, false};  // the forward's and the backward's handle
  std::vector<size_t> peak_index;  // per phase: the event after which requested bytes peaked
  int64_t phase_peak = 0;
  for (size_t index = 0; index < trace.events.size(); ++index) {
    const TraceEvent& e = trace.events[index];
    ++result.events;
    if (timeline != nullptr && index > 0) {  // the previous event's outcome
      timeline->requested.push_back(stats.requested_bytes.current);
      timeline->reserved.push_back(stats.reserved_bytes.current);
    }
    if (e.op == TraceEvent::Op::kPhase) {
      // Peaks start over at each phase, as the run's meter does.
      if (phase != nullptr)
        close_phase(*phase, allocator, retries_before);
      allocator.reset_peak();
      retries_before = stats.num_alloc_retries;
      phase = &result.phases.emplace_back();
      phase->name = trace.phases[static_cast<size_t>(e.phase)];
      peak_index.push_back(index);
      phase_peak = stats.requested_bytes.current;
      continue;
    }
    if (e.op == TraceEvent::Op::kFree) {
      const CachingAllocator::Handle b = blocks[static_cast<size_t>(e.slot)];
      if (device_trace != nullptr && b >= 0) {
        const int64_t address = allocator.block_address(b);
        const int64_t size = slot_bytes[static_cast<size_t>(e.slot)];
        record(index, Action::kFreeRequested, address, size);
        record(index, Action::kFreeCompleted, address, size);
      }
      allocator.free(b);
      continue;
    }
    if (e.op == TraceEvent::Op::kEmptyCache) {
      allocator.empty_cache();
      if (device_trace != nullptr)
        record_segments(index);
      continue;
    }
    if (e.op == TraceEvent::Op::kGemm) {
      bool& taken = workspace_taken[e.backward ? 1 : 0];
      if (workspace_bytes <= 0 || taken)
        continue;
      const CachingAllocator::Handle w = allocator.malloc(workspace_bytes);
      if (w == CachingAllocator::kOom) {
        if (device_trace != nullptr)
          record(index, Action::kOom, 0, workspace_bytes);
        result.oom = PredictedOom{
            e.line,
            0,
            workspace_bytes,
            phase != nullptr ? phase->name : "",
            -1,
            "cuBLAS workspace",
            *allocator.last_oom()};
        break;
      }
      if (device_trace != nullptr)
        record(index, Action::kAlloc, allocator.block_address(w), workspace_bytes);
      taken = true;
      result.workspace_bytes += workspace_bytes;
      const int64_t gap = stats.reserved_bytes.current - stats.allocated_bytes.current;
      if (phase != nullptr && gap > phase->largest_gap_bytes) {
        phase->largest_gap_bytes = gap;
        if (gap > result.largest_gap_bytes) {
          result.largest_gap_bytes = gap;
          result.largest_gap_line = e.line;
        }
      }
      if (phase != nullptr && stats.requested_bytes.current > phase_peak) {
        phase_peak = stats.requested_bytes.current;
        peak_index.back() = index;
      }
      continue;
    }
    const CachingAllocator::Handle h = allocator.malloc(e.bytes);
    if (device_trace != nullptr && h != CachingAllocator::kEmpty) {
      slot_bytes[static_cast<size_t>(e.slot)] = e.bytes;
      if (h == CachingAllocator::kOom)
        record(index, Action::kOom, 0, e.bytes);
      else
        record(index, Action::kAlloc, allocator.block_address(h), e.bytes);
    }
    // Measured as an allocation is served or fails, when held-but-unusable memory costs
    // something (after the last frees of a run, everything reserved is unallocated).
    const int64_t gap = stats.reserved_bytes.current - stats.allocated_bytes.current;
    if (gap > phase->largest_gap_bytes) {
      phase->largest_gap_bytes = gap;
      if (gap > result.largest_gap_bytes) {
        result.largest_gap_bytes = gap;
        result.largest_gap_line = e.line;
      }
    }
    if (h == CachingAllocator::kOom) {
      result.oom = PredictedOom{
          e.line,
          e.id,
          e.bytes,
          trace.phases[static_cast<size_t>(e.phase)],
          e.step,
          trace.tags[static_cast<size_t>(e.tag)],
          *allocator.last_oom()};
      break;
    }
    blocks[static_cast<size_t>(e.slot)] = h;
    if (stats.requested_bytes.current > phase_peak) {
      phase_peak = stats.requested_bytes.current;
      peak_index.back() = index;
    }
    if (result.recording) {
      RecordingMatch& m = *result.recording;
      const int64_t recorded = trace.recorded_reserved[index];
      ++m.allocations;
      if (recorded == stats.reserved_bytes.current)
        ++m.reserved_matches;
      else if (!m.first_mismatch)
        m.first_mismatch = RecordingMatch::Mismatch{e.line, recorded, stats.reserved_bytes.current};
    }
  }
  if (phase != nullptr)
    close_phase(*phase, allocator, retries_before);
  for (const PhasePrediction& p : result.phases) {
    result.peak_requested_bytes = std::max(result.peak_requested_bytes, p.peak_requested_bytes);
    result.peak_allocated_bytes = std::max(result.peak_allocated_bytes, p.peak_allocated_bytes);
    result.peak_reserved_bytes = std::max(result.peak_reserved_bytes, p.peak_reserved_bytes);
  }
  if (device_trace != nullptr) {
    device_trace->segments = allocator.segments();
    allocator.log_segments(nullptr);
  }
  if (timeline != nullptr && result.events > 0) {  // the last event's (an OOM changes nothing)
    timeline->requested.push_back(stats.requested_bytes.current);
    timeline->reserved.push_back(stats.reserved_bytes.current);
  }
  for (size_t k = 0; k < result.phases.size(); ++k)
    result.phases[k].peak_event = peak_index[k];
  fill_live_at_peak(trace, peak_index, result.phases, workspace_bytes);
  result.num_alloc_retries = stats.num_alloc_retries;
  result.num_ooms = stats.num_ooms;
  return result;
}

}  // namespace oomguard::sim
