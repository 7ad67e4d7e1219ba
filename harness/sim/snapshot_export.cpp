#include <oomguard/sim/snapshot_export.h>

#include <stdexcept>

#include <nlohmann/json.hpp>

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
  // Where each trace event came from, as the frame of its entries.
  std::vector<int32_t> phase_of(trace.events.size(), 0);
  int32_t phase = 0;
  for (size_t i = 0; i < trace.events.size(); ++i) {
    if (trace.events[i].op == TraceEvent::Op::kPhase ||
        trace.events[i].op == TraceEvent::Op::kAlloc)
      phase = trace.events[i].phase;
    phase_of[i] = phase;
  }
  std::vector<int32_t> tag_of_slot(static_cast<size_t>(trace.slots), 0);
  std::vector<int64_t> step_of_slot(static_cast<size_t>(trace.slots), -1);
  for (const TraceEvent& e : trace.events)
    if (e.op == TraceEvent::Op::kAlloc) {
      tag_of_slot[static_cast<size_t>(e.slot)] = e.tag;
      step_of_slot[static_cast<size_t>(e.slot)] = e.step;
    }
  const auto frames = [&](size_t event) {
    const TraceEvent& e = trace.events[event];
    const bool block = e.op == TraceEvent::Op::kAlloc || e.op == TraceEvent::Op::kFree;
    const std::string& tag =
        block ? trace.tags[static_cast<size_t>(tag_of_slot[static_cast<size_t>(e.slot)])]
              : trace.tags[0];
    const int64_t step = block ? step_of_slot[static_cast<size_t>(e.slot)] : -1;
    return nlohmann::json::array(
        {{{"filename",
           trace.phases.empty() ? "" : trace.phases[static_cast<size_t>(phase_of[event])]},
          {"line", step < 0 ? 0 : step},
          {"name", tag.empty() ? "(untagged)" : tag}}});
  };

  nlohmann::json entries = nlohmann::json::array();
  int64_t time = 0;
  for (const DeviceTrace::Entry& e : device_trace.entries) {
    nlohmann::json entry = {
        {"action", action_name(e.action)},
        {"size", e.size},
        {"stream", 0},
        {"time_us", time++},
        {"frames", frames(e.event)}};
    if (e.action == Action::kOom)
      entry["device_free"] = 0;
    else
      entry["addr"] = e.address;
    entries.push_back(std::move(entry));
  }
  nlohmann::json segments = nlohmann::json::array();
  for (const SegmentState& s : device_trace.segments) {
    nlohmann::json blocks = nlohmann::json::array();
    int64_t allocated = 0, requested = 0;
    for (const auto& b : s.blocks) {
      blocks.push_back(
          {{"address", b.address},
           {"size", b.size},
           {"requested_size", b.requested},
           {"state", b.allocated ? "active_allocated" : "inactive"},
           {"frames", nlohmann::json::array()}});
      allocated += b.allocated ? b.size : 0;
      requested += b.requested;
    }
    segments.push_back(
        {{"device", 0},
         {"address", s.address},
         {"total_size", s.size},
         {"stream", 0},
         {"segment_type", s.small ? "small" : "large"},
         {"segment_pool_id", nlohmann::json::array({0, 0})},
         {"allocated_size", allocated},
         {"active_size", allocated},
         {"requested_size", requested},
         {"is_expandable", false},
         {"blocks", blocks}});
  }
  const nlohmann::json snapshot = {
      {"segments", segments},
      {"device_traces", nlohmann::json::array({entries})},
      {"allocator_settings", {{"PYTORCH_CUDA_ALLOC_CONF", alloc_conf}}}};
  return write_pickle(snapshot);
}

}  // namespace oomguard::sim
