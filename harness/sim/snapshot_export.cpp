#include <oomguard/sim/snapshot_export.h>

#include <stdexcept>

#include "harness/sim/pickle.h"

namespace oomguard::sim {
namespace {

using Action = DeviceTrace::Entry::Action;

const char* action_name(Action a) {
  switch (a) {
    case Action::kAlloc:
      return "alloc";
    case Action::kFreeRequested:
      return "free_requested";
    case Action::kFreeCompleted:
      return "free_completed";
    case Action::kSegmentAlloc:
      return "segment_alloc";
    case Action::kSegmentFree:
      return "segment_free";
    case Action::kOom:
      return "oom";
  }
  return "";
}

// Where each trace event came from, as the one frame of its entries: the event's phase
// (file), step (line) and tag (function).
class EventFrames {
 public:
  explicit EventFrames(const Trace& trace)
      : trace_(trace),
        phase_of_(trace.events.size(), 0),
        tag_of_slot_(static_cast<size_t>(trace.slots), 0),
        step_of_slot_(static_cast<size_t>(trace.slots), -1) {
    int32_t phase = 0;
    for (size_t i = 0; i < trace.events.size(); ++i) {
      if (trace.events[i].op == TraceEvent::Op::kPhase ||
          trace.events[i].op == TraceEvent::Op::kAlloc)
        phase = trace.events[i].phase;
      phase_of_[i] = phase;
    }
    for (const TraceEvent& e : trace.events)
      if (e.op == TraceEvent::Op::kAlloc) {
        tag_of_slot_[static_cast<size_t>(e.slot)] = e.tag;
        step_of_slot_[static_cast<size_t>(e.slot)] = e.step;
      }
  }

  // The frames of trace event `event`: a list of that one frame.
  void write(PickleWriter& w, size_t event) const {
    const TraceEvent& e = trace_.events[event];
    const bool block = e.op == TraceEvent::Op::kAlloc || e.op == TraceEvent::Op::kFree;
    // A gemm event's allocation is its cuBLAS workspace, named as PyTorch's frames name it.
    static const std::string kWorkspace = "at::cuda::getNewWorkspace()";
    const std::string& tag =
        block ? trace_.tags[static_cast<size_t>(tag_of_slot_[static_cast<size_t>(e.slot)])]
        : e.op == TraceEvent::Op::kGemm ? kWorkspace
                                        : trace_.tags[0];
    const int64_t step = block ? step_of_slot_[static_cast<size_t>(e.slot)] : -1;
    w.begin_list();
    w.begin_dict();
    w.string("filename");
    w.string(trace_.phases.empty() ? "" : trace_.phases[static_cast<size_t>(phase_of_[event])]);
    w.string("line");
    w.integer(step < 0 ? 0 : step);
    w.string("name");
    w.string(tag.empty() ? "(untagged)" : tag);
    w.end();
    w.end();
  }

 private:
  const Trace& trace_;
  std::vector<int32_t> phase_of_;     // per event: the phase it ran in
  std::vector<int32_t> tag_of_slot_;  // per slot: its alloc's tag and step
  std::vector<int64_t> step_of_slot_;
};

// "device_traces": one device's, the entries with their frames.
void write_device_traces(
    PickleWriter& w, const DeviceTrace& device_trace, const EventFrames& frames) {
  w.string("device_traces");
  w.begin_list();
  w.begin_list();
  int64_t time = 0;
  for (const DeviceTrace::Entry& e : device_trace.entries) {
    w.begin_dict();
    w.string("action");
    w.string(action_name(e.action));
    w.string(e.action == Action::kOom ? "device_free" : "addr");
    w.integer(e.action == Action::kOom ? 0 : e.address);
    w.string("frames");
    frames.write(w, e.event);
    w.string("size");
    w.integer(e.size);
    w.string("stream");
    w.integer(0);
    w.string("time_us");
    w.integer(time++);
    w.end();
  }
  w.end();
  w.end();
}

void write_block(PickleWriter& w, const SegmentState::BlockState& b) {
  w.begin_dict();
  w.string("address");
  w.integer(b.address);
  w.string("frames");
  w.begin_list();
  w.end();
  w.string("requested_size");
  w.integer(b.requested);
  w.string("size");
  w.integer(b.size);
  w.string("state");
  w.string(b.allocated ? "active_allocated" : "inactive");
  w.end();
}

void write_segment(PickleWriter& w, const SegmentState& s) {
  int64_t allocated = 0, requested = 0;
  for (const auto& b : s.blocks) {
    allocated += b.allocated ? b.size : 0;
    requested += b.requested;
  }
  w.begin_dict();
  w.string("active_size");
  w.integer(allocated);
  w.string("address");
  w.integer(s.address);
  w.string("allocated_size");
  w.integer(allocated);
  w.string("blocks");
  w.begin_list();
  for (const auto& b : s.blocks)
    write_block(w, b);
  w.end();
  w.string("device");
  w.integer(0);
  w.string("is_expandable");
  w.boolean(false);
  w.string("requested_size");
  w.integer(requested);
  w.string("segment_pool_id");
  w.begin_list();
  w.integer(0);
  w.integer(0);
  w.end();
  w.string("segment_type");
  w.string(s.small ? "small" : "large");
  w.string("stream");
  w.integer(0);
  w.string("total_size");
  w.integer(s.size);
  w.end();
}

}  // namespace

std::string snapshot_pickle(
    const Trace& trace,
    const DeviceTrace& device_trace,
    const std::string& alloc_conf,
    bool expandable_segments) {
  if (expandable_segments)
    throw std::invalid_argument(
        "a snapshot of a replay with expandable_segments:True is not written: its pages are "
        "not segments of their own");
  const EventFrames frames(trace);
  // Written as it goes, keys in sorted order (as a JSON object of the same data would be).
  PickleWriter w;
  w.begin_dict();
  w.string("allocator_settings");
  w.begin_dict();
  w.string("PYTORCH_CUDA_ALLOC_CONF");
  w.string(alloc_conf);
  w.end();
  write_device_traces(w, device_trace, frames);
  w.string("segments");
  w.begin_list();
  for (const SegmentState& s : device_trace.segments)
    write_segment(w, s);
  w.end();
  w.end();
  return w.finish();
}

}  // namespace oomguard::sim
