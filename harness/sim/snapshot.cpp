#include <oomguard/sim/snapshot.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "harness/sim/pickle.h"
#include "harness/sim/rounding.h"
#include "harness/sim/snapshot_reader.h"

namespace oomguard::sim {
namespace {

using Kind = PickleValue::Kind;

std::string hex(int64_t address) {
  char text[24];
  std::snprintf(text, sizeof(text), "0x%llx", static_cast<unsigned long long>(address));
  return text;
}

using snapshot_reading::SnapshotReader;

struct Segment {
  int64_t size = 0;
  bool small = false;
};

// ---- Steps of read_snapshot.

Pickle open_pickle(std::string_view bytes, const std::string& source) {
  try {
    return Pickle(bytes);
  } catch (const PickleError& e) {
    throw SnapshotError(source + ": " + e.what());
  }
}

// The device the replay follows: the one whose trace has entries.
int64_t recorded_device(const SnapshotReader& r, const PickleValue& traces) {
  std::vector<int64_t> devices;
  for (size_t d = 0; d < traces.children.size(); ++d) {
    const PickleValue& t = r.item(traces, d);
    if (t.kind != Kind::kList)
      r.fail("device_traces[" + std::to_string(d) + "] is not a list");
    if (!t.children.empty())
      devices.push_back(static_cast<int64_t>(d));
  }
  if (devices.empty())
    r.fail(
        "its device traces are empty: record with torch.cuda.memory._record_memory_history() "
        "before the code to replay runs");
  if (devices.size() > 1)
    r.fail(
        "events on CUDA devices " + std::to_string(devices[0]) + " and " +
        std::to_string(devices[1]) + "; the allocator model replays one device");
  return devices[0];
}

// The allocator settings it was recorded with, where it says.
void read_recorded_alloc_conf(
    const Pickle& pickle, const SnapshotReader& r, const PickleValue& root, SnapshotInfo& info) {
  if (const PickleValue* settings = pickle.get(root, "allocator_settings")) {
    const std::string_view conf = r.text(*settings, "PYTORCH_CUDA_ALLOC_CONF");
    info.alloc_conf = std::string(conf);
    info.alloc_conf_recorded = pickle.get(*settings, "PYTORCH_CUDA_ALLOC_CONF") != nullptr;
  }
}

// What the device trace and the segments say: the events, and the allocator's state when
// recording began.
struct Recording {
  Trace trace;
  std::vector<int64_t> reserved_delta{0};    // per trace event: recorded reserved since the start
  std::map<int64_t, Segment> initial;        // address -> segment held when recording began
  std::unordered_set<int64_t> new_segments;  // segment_alloc'ed in the recording, not freed
  std::unordered_set<int64_t> touched;       // block addresses the trace allocates or frees
  std::map<int64_t, std::pair<AdoptedBlock, int32_t>> initial_live;  // address -> block, slot
};

// The device trace's entries, one after another, as trace events.
class EntryReader {
 public:
  EntryReader(SnapshotReader& r, Recording& out) : r_(r), out_(out) {
    out_.trace.tags.emplace_back();
    out_.trace.phases.emplace_back("recording");
    out_.trace.events.push_back(TraceEvent::phase_start(/*phase=*/0, /*line=*/0));
  }

  // Entry number `line` (from 1).
  void read(const PickleValue& entry, int64_t line) {
    const std::string what = "device trace entry " + std::to_string(line);
    if (entry.kind != Kind::kDict)
      r_.fail(what + " is not a dict");
    const std::string_view action = r_.text(entry, "action");
    const bool block_event = action == "alloc" || action == "free_requested";
    const bool segment_event = action == "segment_alloc" || action == "segment_free";
    if (!block_event && !segment_event && action != "oom")
      return;  // free_completed (one stream: right after free_requested), snapshot, annotate
    // A run of segment_free entries that no new segment or OOM follows was empty_cache():
    // inside malloc's release-and-retry ladder a segment_alloc or an oom comes next.
    if (pending_segment_frees_ > 0 && action != "segment_free" && action != "segment_alloc" &&
        action != "oom")
      add_event(TraceEvent::empty_cache(line));
    if (action != "segment_free")
      pending_segment_frees_ = 0;
    if (action == "oom")
      return;
    r_.check_stream(entry, what.c_str());
    const int64_t addr = r_.integer(entry, "addr", what.c_str());
    const int64_t size = r_.integer(entry, "size", what.c_str());
    if (size < 0 || (segment_event && size == 0))
      r_.fail(what + ": size " + std::to_string(size) + " is impossible");
    if (action == "segment_alloc") {
      out_.new_segments.insert(addr);
      delta_ += size;
    } else if (action == "segment_free") {
      if (out_.new_segments.erase(addr) == 0)
        out_.initial[addr] = {size, size == kSmallBuffer};
      delta_ -= size;
      ++pending_segment_frees_;
    } else if (action == "alloc") {
      alloc(entry, what, addr, size, line);
    } else {
      free_requested(what, addr, size, line);
    }
  }

  // After the last entry, which `entries` numbers.
  void finish(int64_t entries) {
    if (pending_segment_frees_ > 0)
      add_event(TraceEvent::empty_cache(entries));
  }

 private:
  void add_event(const TraceEvent& e) {
    out_.trace.events.push_back(e);
    out_.reserved_delta.push_back(delta_);
  }

  void alloc(
      const PickleValue& entry, const std::string& what, int64_t addr, int64_t size, int64_t line) {
    Trace& trace = out_.trace;
    out_.touched.insert(addr);
    if (live_.count(addr) != 0)
      r_.fail(what + ": block " + hex(addr) + " allocated again before its free");
    const std::string tag = r_.origin(entry);
    const auto [it, added] = tag_index_.emplace(tag, static_cast<int32_t>(trace.tags.size()));
    if (added)
      trace.tags.push_back(tag);
    live_[addr] = trace.slots;
    add_event(TraceEvent::alloc(
        /*slot=*/trace.slots++,
        /*bytes=*/size,
        /*id=*/addr,
        /*phase=*/0,
        /*tag=*/it->second,
        /*step=*/-1,
        line));
  }

  void free_requested(const std::string& what, int64_t addr, int64_t size, int64_t line) {
    out_.touched.insert(addr);
    int32_t slot;
    if (const auto it = live_.find(addr); it != live_.end()) {
      slot = it->second;
      live_.erase(it);
    } else {
      if (out_.initial_live.count(addr) != 0)
        r_.fail(what + ": block " + hex(addr) + " freed twice");
      slot = out_.trace.slots++;  // allocated before recording began
      out_.initial_live[addr] = {
          {addr, round_up(std::max<int64_t>(size, 1), kMinBlockSize), size}, slot};
    }
    add_event(TraceEvent::free(slot, /*id=*/addr, line));
  }

  SnapshotReader& r_;
  Recording& out_;
  std::unordered_map<std::string, int32_t> tag_index_;
  std::unordered_map<int64_t, int32_t> live_;  // block address -> slot, allocated in the recording
  int64_t delta_ = 0;
  size_t pending_segment_frees_ = 0;  // segment_free entries since the last allocation
};

// Segment `what` at the end is refused when the model cannot replay it.
void check_replayable(
    const Pickle& pickle,
    const SnapshotReader& r,
    const PickleValue& seg,
    const std::string& what) {
  if (const PickleValue* pool = pickle.get(seg, "segment_pool_id");
      pool != nullptr && pool->kind == Kind::kList &&
      std::any_of(pool->children.begin(), pool->children.end(), [&](uint32_t c) {
        return pickle.at(c).kind == Kind::kInt && pickle.at(c).integer != 0;
      }))
    r.fail(
        what +
        " belongs to a private memory pool (a CUDA graph or torch.cuda.MemPool); "
        "the allocator model has none");
  if (const PickleValue* e = pickle.get(seg, "is_expandable");
      e != nullptr && e->kind == Kind::kBool && e->integer != 0)
    r.fail(
        what +
        " is an expandable segment: recorded with expandable_segments:True, which "
        "the snapshot import does not model; record with the default to replay");
}

// The live blocks of segment `what` (at `address`, held when recording began) that the trace
// never touches: they were live then too.
void read_untouched_blocks(
    const Pickle& pickle,
    const SnapshotReader& r,
    const PickleValue& seg,
    const std::string& what,
    int64_t address,
    Recording& out) {
  const PickleValue& blocks = r.field(seg, "blocks", Kind::kList, what.c_str());
  int64_t offset = address;
  for (uint32_t b : blocks.children) {
    const PickleValue& block = pickle.at(b);
    const int64_t bsize = r.integer(block, "size", what.c_str());
    if (bsize <= 0)
      r.fail(what + ": a block of size " + std::to_string(bsize));
    const PickleValue* at = pickle.get(block, "address");
    const int64_t baddr = at != nullptr && at->kind == Kind::kInt ? at->integer : offset;
    offset = baddr + bsize;
    const std::string_view state = r.text(block, "state");
    if (state != "active_allocated" && state != "active_awaiting_free")
      continue;
    if (out.touched.count(baddr) != 0 || out.initial_live.count(baddr) != 0)
      continue;
    const PickleValue* requested = pickle.get(block, "requested_size");
    out.initial_live[baddr] = {
        {baddr,
         bsize,
         requested != nullptr && requested->kind == Kind::kInt ? requested->integer : bsize},
        out.trace.slots++};
  }
}

// The state at the end: segments never segment_alloc'ed in the recording were there before
// it, and so were their live blocks that the trace never touches.
void read_segments(
    const Pickle& pickle,
    SnapshotReader& r,
    const PickleValue& segments,
    int64_t device,
    Recording& out) {
  for (size_t s = 0; s < segments.children.size(); ++s) {
    const PickleValue& seg = r.item(segments, s);
    const std::string what = "segment " + std::to_string(s);
    if (seg.kind != Kind::kDict)
      r.fail(what + " is not a dict");
    const PickleValue* on = pickle.get(seg, "device");
    if (on != nullptr && on->kind == Kind::kInt && on->integer != device)
      continue;
    r.check_stream(seg, what.c_str());
    check_replayable(pickle, r, seg, what);
    const int64_t address = r.integer(seg, "address", what.c_str());
    const int64_t total = r.integer(seg, "total_size", what.c_str());
    if (total <= 0)
      r.fail(what + ": total_size " + std::to_string(total) + " is impossible");
    if (out.new_segments.count(address) != 0)
      continue;
    out.initial[address] = {total, r.text(seg, "segment_type") == "small"};
    read_untouched_blocks(pickle, r, seg, what, address, out);
  }
}

// The segments held when recording began, in address order, as trace.initial_segments;
// returns their bytes and fills `segment_of` (address -> index).
int64_t place_initial_segments(
    const SnapshotReader& r, Recording& out, std::map<int64_t, size_t>& segment_of) {
  std::vector<InitialSegment>& placed = out.trace.initial_segments;
  int64_t initial_reserved = 0;
  for (const auto& [address, s] : out.initial) {
    if (!placed.empty()) {
      const InitialSegment& before = placed.back();
      if (before.address + before.size > address)
        r.fail("segments at " + hex(before.address) + " and " + hex(address) + " overlap");
    }
    segment_of[address] = placed.size();
    placed.push_back({address, s.size, s.small, {}, {}});
    initial_reserved += s.size;
  }
  return initial_reserved;
}

// Each block live when recording began goes into the segment that holds it.
void place_initial_blocks(
    const SnapshotReader& r, Recording& out, const std::map<int64_t, size_t>& segment_of) {
  for (auto& [address, block_slot] : out.initial_live) {
    auto it = segment_of.upper_bound(address);
    InitialSegment* seg =
        it == segment_of.begin() ? nullptr : &out.trace.initial_segments[std::prev(it)->second];
    if (seg == nullptr || address >= seg->address + seg->size)
      r.fail(
          "block " + hex(address) +
          ", live when recording began, lies in no segment held "
          "then; the snapshot contradicts itself");
    AdoptedBlock b = block_slot.first;
    const int64_t end = seg->address + seg->size;
    b.size = std::min(b.size, end - address);  // a guessed size stays inside its segment
    if (!seg->live.empty()) {
      AdoptedBlock& before = seg->live.back();
      before.size = std::min(before.size, address - before.address);
    }
    seg->live.push_back(b);
    seg->slots.push_back(block_slot.second);
  }
}

}  // namespace

Trace read_snapshot(std::string_view bytes, const std::string& source, SnapshotInfo& info) {
  const Pickle pickle = open_pickle(bytes, source);
  SnapshotReader r(pickle, source);
  const PickleValue& root = pickle.root();
  if (root.kind != Kind::kDict)
    r.fail("the pickle holds no dict; not a PyTorch memory snapshot");
  const PickleValue& segments = r.field(root, "segments", Kind::kList, "the snapshot");
  const PickleValue& traces = r.field(root, "device_traces", Kind::kList, "the snapshot");
  info.device = recorded_device(r, traces);
  const PickleValue& entries = r.item(traces, static_cast<size_t>(info.device));
  info.entries = static_cast<int64_t>(entries.children.size());
  read_recorded_alloc_conf(pickle, r, root, info);

  Recording recording;
  EntryReader entry_reader(r, recording);
  for (size_t i = 0; i < entries.children.size(); ++i)
    entry_reader.read(r.item(entries, i), static_cast<int64_t>(i + 1));
  entry_reader.finish(info.entries);
  read_segments(pickle, r, segments, info.device, recording);

  std::map<int64_t, size_t> segment_of;  // address -> index into trace.initial_segments
  const int64_t initial_reserved = place_initial_segments(r, recording, segment_of);
  place_initial_blocks(r, recording, segment_of);
  // The recording's reserved bytes after each event: its segment_alloc / segment_free timeline.
  Trace& trace = recording.trace;
  trace.recorded_reserved.reserve(recording.reserved_delta.size());
  for (int64_t d : recording.reserved_delta)
    trace.recorded_reserved.push_back(initial_reserved + d);
  return std::move(trace);
}

}  // namespace oomguard::sim
