#include "harness/compare/event_side.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/sim/pickle.h"
#include <oomguard/sim/allocator_settings.h>
#include <oomguard/sim/replay.h>
#include <oomguard/sim/snapshot.h>
#include <oomguard/sim/trace.h>

namespace oomguard::compare {
namespace {

using nlohmann::json;

constexpr int64_t kNoLimit = int64_t{1} << 62;  // a replay for figures, not for a card

// A trace's first line is an event: {"op": ...}.
bool is_trace(const std::string& bytes) {
  const json line = json::parse(bytes.substr(0, bytes.find('\n')), nullptr, false);
  return line.is_object() && line.contains("op");
}

// A snapshot's frame "forward (model.py:42)" as "forward (model.py)": a change that moves
// the line (a line added above it) is not a change of what was live.
std::string without_line(const std::string& frame) {
  const size_t colon = frame.rfind(':');
  if (frame.empty() || frame.back() != ')' || colon == std::string::npos ||
      frame.find(" (") == std::string::npos || colon < frame.rfind(" ("))
    return frame;
  return frame.substr(0, colon) + ")";
}

}  // namespace

bool is_event_side(const std::string& bytes) {
  return sim::looks_like_pickle(bytes) || is_trace(bytes);
}

// A trace or snapshot, replayed with the default (a snapshot: its recorded) allocator settings
// and no CPU-to-GPU rules, for the reserved figure. A phase's growth: the requested bytes
// where the next phase begins minus where it began; the last phase has none (a trace does not
// say where it ended, and what follows it is the program's teardown).
Side read_event_side(const std::string& bytes, const std::string& path) {
  const bool snapshot = sim::looks_like_pickle(bytes);
  Side side{path, snapshot ? InputKind::kSnapshot : InputKind::kTrace, {}};
  sim::Trace trace;
  sim::SnapshotInfo info;
  try {
    if (snapshot) {
      trace = sim::read_snapshot(bytes, path, info);
    } else {
      std::istringstream in(bytes);
      trace = sim::read_trace(in, path);
    }
  } catch (const sim::TraceError& e) {
    throw InputError(e.what());
  }
  const auto settings = sim::AllocatorSettings::parse(info.alloc_conf);
  sim::Timeline timeline;
  const auto r = sim::replay(trace, settings, sim::DeviceLimits::capacity(kNoLimit), &timeline);

  std::vector<int64_t> growth;  // per phase of the replay, in order
  int32_t current = -1;
  int64_t started = 0;
  for (size_t i = 0; i < timeline.requested.size(); ++i) {
    const auto& ev = trace.events[i];
    const bool starts =
        ev.op == sim::TraceEvent::Op::kPhase || ev.op == sim::TraceEvent::Op::kAlloc;
    if (!starts || ev.phase == current)
      continue;
    const int64_t before = i == 0 ? 0 : timeline.requested[i - 1];
    if (current >= 0)
      growth.push_back(before - started);
    current = ev.phase;
    started = before;
  }
  TestFigures t;
  t.name = snapshot ? "snapshot" : "trace";
  if (snapshot)
    t.conditions = {
        {"allocator settings", info.alloc_conf.empty() ? "default" : info.alloc_conf},
        {"device", std::to_string(info.device)}};
  for (size_t i = 0; i < r.phases.size(); ++i) {
    const auto& p = r.phases[i];
    PhaseFigures f;
    f.name = p.name;
    f.peak_allocated_bytes = p.peak_requested_bytes;
    f.peak_reserved_bytes = p.peak_reserved_bytes;
    if (i < growth.size())
      f.growth_bytes = growth[i];
    f.tags_known = true;
    for (const auto& tag : p.live_at_peak) {
      const std::string name = snapshot ? without_line(tag.tag) : tag.tag;
      const auto same = std::find_if(
          f.live_at_peak.begin(), f.live_at_peak.end(), [&](auto& x) { return x.tag == name; });
      if (same == f.live_at_peak.end())
        f.live_at_peak.push_back({name, tag.bytes});
      else
        same->bytes += tag.bytes;
    }
    t.phases.push_back(std::move(f));
  }
  side.tests.push_back(std::move(t));
  return side;
}

}  // namespace oomguard::compare
