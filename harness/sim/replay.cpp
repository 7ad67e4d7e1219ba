#include <oomguard/sim/replay.h>

#include <algorithm>

#include "harness/sim/replay_observers.h"

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

using Handle = CachingAllocator::Handle;
using replay_observers::DeviceTraceRecorder;
using replay_observers::RecordingMatcher;
using replay_observers::TimelineRecorder;

// The handles of the blocks live in the trace's initial segments, by slot, once `allocator`
// holds those segments.
std::vector<Handle> adopt_initial_segments(CachingAllocator& allocator, const Trace& trace) {
  std::vector<Handle> blocks(static_cast<size_t>(trace.slots));
  for (const InitialSegment& s : trace.initial_segments) {
    const auto handles = allocator.adopt_segment(s.address, s.size, s.small, s.live);
    for (size_t i = 0; i < handles.size(); ++i)
      blocks[static_cast<size_t>(s.slots[i])] = handles[i];
  }
  return blocks;
}

// ---- One pass over the trace: the allocator model, the phases' figures and the observers.
class ReplayPass {
 public:
  ReplayPass(
      const Trace& trace,
      const AllocatorSettings& settings,
      const DeviceLimits& device,
      int64_t workspace_bytes,
      ReplayResult& result,
      Timeline* timeline,
      DeviceTrace* device_trace)
      : trace_(trace),
        workspace_bytes_(workspace_bytes),
        result_(result),
        allocator_(settings, device),
        stats_(allocator_.stats()),
        blocks_(adopt_initial_segments(allocator_, trace)),
        timeline_(timeline, stats_),
        device_trace_(device_trace, allocator_, trace),
        recording_(trace, result.recording) {}

  // Replays event `index`; false where it is the predicted OOM, as the real run stops there.
  bool replay_event(size_t index) {
    const TraceEvent& e = trace_.events[index];
    ++result_.events;
    timeline_.event_begins(index);
    switch (e.op) {
      case TraceEvent::Op::kPhase:
        start_phase(index, e);
        return true;
      case TraceEvent::Op::kFree:
        free_block(index, e);
        return true;
      case TraceEvent::Op::kEmptyCache:
        allocator_.empty_cache();
        device_trace_.emptied(index);
        return true;
      case TraceEvent::Op::kGemm:
        return take_workspace(index, e);
      case TraceEvent::Op::kAlloc:
        break;
    }
    return allocate(index, e);
  }

  // After the last event replayed: the phases' and the replay's figures, the observers' ends.
  void finish() {
    if (phase_ != nullptr)
      close_phase(*phase_, allocator_, retries_before_);
    for (const PhasePrediction& p : result_.phases) {
      result_.peak_requested_bytes = std::max(result_.peak_requested_bytes, p.peak_requested_bytes);
      result_.peak_allocated_bytes = std::max(result_.peak_allocated_bytes, p.peak_allocated_bytes);
      result_.peak_reserved_bytes = std::max(result_.peak_reserved_bytes, p.peak_reserved_bytes);
    }
    device_trace_.finish();
    timeline_.finish(result_.events);
    for (size_t k = 0; k < result_.phases.size(); ++k)
      result_.phases[k].peak_event = peak_index_[k];
    fill_live_at_peak(trace_, peak_index_, result_.phases, workspace_bytes_);
    result_.num_alloc_retries = stats_.num_alloc_retries;
    result_.num_ooms = stats_.num_ooms;
  }

 private:
  // Peaks start over at each phase, as the run's meter does.
  void start_phase(size_t index, const TraceEvent& e) {
    if (phase_ != nullptr)
      close_phase(*phase_, allocator_, retries_before_);
    allocator_.reset_peak();
    retries_before_ = stats_.num_alloc_retries;
    phase_ = &result_.phases.emplace_back();
    phase_->name = trace_.phases[static_cast<size_t>(e.phase)];
    peak_index_.push_back(index);
    phase_peak_ = stats_.requested_bytes.current;
  }

  void free_block(size_t index, const TraceEvent& e) {
    const Handle b = blocks_[static_cast<size_t>(e.slot)];
    device_trace_.freeing(index, e.slot, b);
    allocator_.free(b);
  }

  // The first gemm of a handle takes its cuBLAS workspace; false where it does not fit.
  bool take_workspace(size_t index, const TraceEvent& e) {
    bool& taken = workspace_taken_[e.backward ? 1 : 0];
    if (workspace_bytes_ <= 0 || taken)
      return true;
    const Handle w = allocator_.malloc(workspace_bytes_);
    device_trace_.workspace(index, w, workspace_bytes_);
    if (w == CachingAllocator::kOom) {
      result_.oom = PredictedOom{
          e.line,
          /*id=*/0,
          workspace_bytes_,
          phase_ != nullptr ? phase_->name : "",
          /*step=*/-1,
          "cuBLAS workspace",
          *allocator_.last_oom()};
      return false;
    }
    taken = true;
    result_.workspace_bytes += workspace_bytes_;
    if (phase_ != nullptr) {
      note_gap(*phase_, e.line);
      note_peak(index);
    }
    return true;
  }

  // False where the allocation is the predicted OOM.
  bool allocate(size_t index, const TraceEvent& e) {
    const Handle h = allocator_.malloc(e.bytes);
    device_trace_.allocated(index, e.slot, h, e.bytes);
    note_gap(*phase_, e.line);
    if (h == CachingAllocator::kOom) {
      result_.oom = PredictedOom{
          e.line,
          e.id,
          e.bytes,
          trace_.phases[static_cast<size_t>(e.phase)],
          e.step,
          trace_.tags[static_cast<size_t>(e.tag)],
          *allocator_.last_oom()};
      return false;
    }
    blocks_[static_cast<size_t>(e.slot)] = h;
    note_peak(index);
    recording_.allocated(index, e.line, stats_.reserved_bytes.current);
    return true;
  }

  // Measured as an allocation is served or fails, when held-but-unusable memory costs
  // something (after the last frees of a run, everything reserved is unallocated).
  void note_gap(PhasePrediction& phase, int64_t line) {
    const int64_t gap = stats_.reserved_bytes.current - stats_.allocated_bytes.current;
    if (gap > phase.largest_gap_bytes) {
      phase.largest_gap_bytes = gap;
      if (gap > result_.largest_gap_bytes) {
        result_.largest_gap_bytes = gap;
        result_.largest_gap_line = line;
      }
    }
  }

  // Event `index` is the current phase's peak of requested bytes so far, where it is above.
  void note_peak(size_t index) {
    if (stats_.requested_bytes.current > phase_peak_) {
      phase_peak_ = stats_.requested_bytes.current;
      peak_index_.back() = index;
    }
  }

  const Trace& trace_;
  int64_t workspace_bytes_;
  ReplayResult& result_;
  // In this order: the initial segments are adopted before the device trace logs segments.
  CachingAllocator allocator_;
  const AllocatorStats& stats_;
  std::vector<Handle> blocks_;  // per slot: its block while live
  TimelineRecorder timeline_;
  DeviceTraceRecorder device_trace_;
  RecordingMatcher recording_;
  PhasePrediction* phase_ = nullptr;  // the phase running, in result_.phases
  int64_t retries_before_ = 0;        // the allocator's retries when it began
  int64_t phase_peak_ = 0;            // its requested bytes at their peak so far
  std::vector<size_t> peak_index_;    // per phase: the event after which requested bytes peaked
  bool workspace_taken_[2] = {false, false};  // the forward's and the backward's handle
};

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
  ReplayPass pass(trace, settings, device, workspace_bytes, result, timeline, device_trace);
  for (size_t index = 0; index < trace.events.size(); ++index)
    if (!pass.replay_event(index))
      break;
  pass.finish();
  return result;
}

}  // namespace oomguard::sim
