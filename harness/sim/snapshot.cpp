#include <oomguard/sim/snapshot.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "harness/sim/pickle.h"
#include "harness/sim/rounding.h"

namespace oomguard::sim {
namespace {

using Kind = PickleValue::Kind;

std::string hex(int64_t address) {
  char text[24];
  std::snprintf(text, sizeof(text), "0x%llx", static_cast<unsigned long long>(address));
  return text;
}

// Reads the parts of a snapshot that a replay needs, failing with the file's name.
class SnapshotReader {
 public:
  SnapshotReader(const Pickle& pickle, const std::string& source)
      : pickle_(pickle), source_(source) {}

  [[noreturn]] void fail(const std::string& why) const {
    throw SnapshotError(source_ + ": " + why);
  }
  const PickleValue& field(
      const PickleValue& dict, const char* key, Kind kind, const char* what) const {
    const PickleValue* v = pickle_.get(dict, key);
    if (v == nullptr || v->kind != kind)
      fail(
          std::string(what) + " has no " + (kind == Kind::kList ? "list" : "value") + " \"" + key +
          "\"; not a PyTorch memory snapshot?");
    return *v;
  }
  int64_t integer(const PickleValue& dict, const char* key, const char* what) const {
    return field(dict, key, Kind::kInt, what).integer;
  }
  std::string_view text(const PickleValue& dict, const char* key) const {
    const PickleValue* v = pickle_.get(dict, key);
    return v != nullptr && v->kind == Kind::kString ? v->text : std::string_view();
  }
  const PickleValue& item(const PickleValue& list, size_t i) const {
    return pickle_.at(list.children[i]);
  }

  // Where an allocation came from: the first frame outside PyTorch, as "name (file:line)".
  // What an allocation is for, from its frames: the LibTorch function of a CPU-to-GPU rule
  // (a cuBLAS workspace: "at::cuda::getNewWorkspace()"), else the first frame with a source
  // file outside PyTorch and outside its recording and allocator machinery (the user's code).
  std::string origin(const PickleValue& entry) const {
    const PickleValue* frames = pickle_.get(entry, "frames");
    if (frames == nullptr || frames->kind != Kind::kList)
      return "";
    for (uint32_t f : frames->children) {
      const std::string_view name = text(pickle_.at(f), "name");
      if (name.find("getNewWorkspace") != std::string_view::npos ||
          name.find("getCUDABlasLtWorkspace") != std::string_view::npos)
        return std::string(name);
    }
    for (uint32_t f : frames->children) {
      const PickleValue& frame = pickle_.at(f);
      const std::string_view file = text(frame, "filename");
      if (file.empty() || file == "??" || file.find("/torch/") != std::string_view::npos ||
          file == "memory_snapshot.cpp" || file == "CUDACachingAllocator.cpp")
        continue;
      const PickleValue* line = pickle_.get(frame, "line");
      // size_t(-1), PyTorch's unknown line, is read as unsigned; shown as "?".
      const bool known =
          line != nullptr && line->kind == Kind::kInt && !line->unsigned_64 && line->integer >= 0;
      const size_t slash = file.rfind('/');
      return std::string(text(frame, "name")) + " (" +
             std::string(slash == std::string_view::npos ? file : file.substr(slash + 1)) + ":" +
             (known ? std::to_string(line->integer) : std::string("?")) + ")";
    }
    return "";
  }

  void check_stream(const PickleValue& dict, const char* what) {
    const PickleValue* s = pickle_.get(dict, "stream");
    if (s == nullptr || s->kind != Kind::kInt)
      return;
    streams_.insert(s->integer);
    if (streams_.size() > 1)
      fail(
          std::string(what) + " on a second CUDA stream (" + std::to_string(*streams_.begin()) +
          " and " + std::to_string(*streams_.rbegin()) +
          "); the allocator model replays one stream");
  }

 private:
  const Pickle& pickle_;
  std::string source_;
  std::set<int64_t> streams_;
};

struct Segment {
  int64_t size = 0;
  bool small = false;
};

}  // namespace

Trace read_snapshot(std::string_view bytes, const std::string& source, SnapshotInfo& info) {
  std::optional<Pickle> pickle;
  try {
    pickle.emplace(bytes);
  } catch (const PickleError& e) {
    throw SnapshotError(source + ": " + e.what());
  }
  SnapshotReader r(*pickle, source);
  const PickleValue& root = pickle->root();
  if (root.kind != Kind::kDict)
    r.fail("the pickle holds no dict; not a PyTorch memory snapshot");
  const PickleValue& segments = r.field(root, "segments", Kind::kList, "the snapshot");
  const PickleValue& traces = r.field(root, "device_traces", Kind::kList, "the snapshot");

  // The device: the one whose trace has entries.
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
  info.device = devices[0];
  const PickleValue& entries = r.item(traces, static_cast<size_t>(info.device));
  info.entries = static_cast<int64_t>(entries.children.size());
  if (const PickleValue* settings = pickle->get(root, "allocator_settings")) {
    const std::string_view conf = r.text(*settings, "PYTORCH_CUDA_ALLOC_CONF");
    info.alloc_conf = std::string(conf);
    info.alloc_conf_recorded = pickle->get(*settings, "PYTORCH_CUDA_ALLOC_CONF") != nullptr;
  }

  Trace trace;
  trace.tags.emplace_back();
  trace.phases.emplace_back("recording");
  std::unordered_map<std::string, int32_t> tag_index;
  trace.events.push_back({TraceEvent::Op::kPhase, 0, 0, 0, 0, -1, 0, 0});
  std::vector<int64_t> reserved_delta{0};  // per trace event: recorded reserved since the start

  std::map<int64_t, Segment> initial;         // address -> segment held when recording began
  std::unordered_set<int64_t> new_segments;   // segment_alloc'ed in the recording, not freed
  std::unordered_map<int64_t, int32_t> live;  // block address -> slot, allocated in the recording
  std::unordered_set<int64_t> touched;        // block addresses the trace allocates or frees
  std::map<int64_t, std::pair<AdoptedBlock, int32_t>> initial_live;  // address -> block, slot
  int64_t delta = 0;
  size_t pending_segment_frees = 0;  // segment_free entries since the last allocation
  const auto add_event = [&](TraceEvent e) {
    trace.events.push_back(e);
    reserved_delta.push_back(delta);
  };

  for (size_t i = 0; i < entries.children.size(); ++i) {
    const PickleValue& entry = r.item(entries, i);
    const auto line = static_cast<int64_t>(i + 1);
    const std::string what = "device trace entry " + std::to_string(line);
    if (entry.kind != Kind::kDict)
      r.fail(what + " is not a dict");
    const std::string_view action = r.text(entry, "action");
    const bool block_event = action == "alloc" || action == "free_requested";
    const bool segment_event = action == "segment_alloc" || action == "segment_free";
    if (!block_event && !segment_event && action != "oom")
      continue;  // free_completed (one stream: right after free_requested), snapshot, annotate
    // A run of segment_free entries that no new segment or OOM follows was empty_cache():
    // inside malloc's release-and-retry ladder a segment_alloc or an oom comes next.
    if (pending_segment_frees > 0 && action != "segment_free" && action != "segment_alloc" &&
        action != "oom")
      add_event({TraceEvent::Op::kEmptyCache, 0, 0, 0, 0, -1, 0, line});
    if (action != "segment_free")
      pending_segment_frees = 0;
    if (action == "oom")
      continue;
    r.check_stream(entry, what.c_str());
    const int64_t addr = r.integer(entry, "addr", what.c_str());
    const int64_t size = r.integer(entry, "size", what.c_str());
    if (size < 0 || (segment_event && size == 0))
      r.fail(what + ": size " + std::to_string(size) + " is impossible");
    if (action == "segment_alloc") {
      new_segments.insert(addr);
      delta += size;
    } else if (action == "segment_free") {
      if (new_segments.erase(addr) == 0)
        initial[addr] = {size, size == kSmallBuffer};
      delta -= size;
      ++pending_segment_frees;
    } else if (action == "alloc") {
      touched.insert(addr);
      if (live.count(addr) != 0)
        r.fail(what + ": block " + hex(addr) + " allocated again before its free");
      const std::string tag = r.origin(entry);
      const auto [it, added] = tag_index.emplace(tag, static_cast<int32_t>(trace.tags.size()));
      if (added)
        trace.tags.push_back(tag);
      live[addr] = trace.slots;
      add_event({TraceEvent::Op::kAlloc, 0, it->second, trace.slots++, size, -1, addr, line});
    } else {  // free_requested
      touched.insert(addr);
      int32_t slot;
      if (const auto it = live.find(addr); it != live.end()) {
        slot = it->second;
        live.erase(it);
      } else {
        if (initial_live.count(addr) != 0)
          r.fail(what + ": block " + hex(addr) + " freed twice");
        slot = trace.slots++;  // allocated before recording began
        initial_live[addr] = {
            {addr, round_up(std::max<int64_t>(size, 1), kMinBlockSize), size}, slot};
      }
      add_event({TraceEvent::Op::kFree, 0, 0, slot, 0, -1, addr, line});
    }
  }
  if (pending_segment_frees > 0)
    add_event({TraceEvent::Op::kEmptyCache, 0, 0, 0, 0, -1, 0, info.entries});

  // The state at the end: segments never segment_alloc'ed in the recording were there before
  // it, and so were their live blocks that the trace never touches.
  for (size_t s = 0; s < segments.children.size(); ++s) {
    const PickleValue& seg = r.item(segments, s);
    const std::string what = "segment " + std::to_string(s);
    if (seg.kind != Kind::kDict)
      r.fail(what + " is not a dict");
    const PickleValue* device = pickle->get(seg, "device");
    if (device != nullptr && device->kind == Kind::kInt && device->integer != info.device)
      continue;
    r.check_stream(seg, what.c_str());
    if (const PickleValue* pool = pickle->get(seg, "segment_pool_id");
        pool != nullptr && pool->kind == Kind::kList &&
        std::any_of(pool->children.begin(), pool->children.end(), [&](uint32_t c) {
          return pickle->at(c).kind == Kind::kInt && pickle->at(c).integer != 0;
        }))
      r.fail(
          what +
          " belongs to a private memory pool (a CUDA graph or torch.cuda.MemPool); "
          "the allocator model has none");
    if (const PickleValue* e = pickle->get(seg, "is_expandable");
        e != nullptr && e->kind == Kind::kBool && e->integer != 0)
      r.fail(
          what +
          " is an expandable segment: recorded with expandable_segments:True, which "
          "the snapshot import does not model; record with the default to replay");
    const int64_t address = r.integer(seg, "address", what.c_str());
    const int64_t total = r.integer(seg, "total_size", what.c_str());
    if (total <= 0)
      r.fail(what + ": total_size " + std::to_string(total) + " is impossible");
    if (new_segments.count(address) != 0)
      continue;
    initial[address] = {total, r.text(seg, "segment_type") == "small"};
    const PickleValue& blocks = r.field(seg, "blocks", Kind::kList, what.c_str());
    int64_t offset = address;
    for (uint32_t b : blocks.children) {
      const PickleValue& block = pickle->at(b);
      const int64_t bsize = r.integer(block, "size", what.c_str());
      if (bsize <= 0)
        r.fail(what + ": a block of size " + std::to_string(bsize));
      const PickleValue* at = pickle->get(block, "address");
      const int64_t baddr = at != nullptr && at->kind == Kind::kInt ? at->integer : offset;
      offset = baddr + bsize;
      const std::string_view state = r.text(block, "state");
      if (state != "active_allocated" && state != "active_awaiting_free")
        continue;
      if (touched.count(baddr) != 0 || initial_live.count(baddr) != 0)
        continue;
      const PickleValue* requested = pickle->get(block, "requested_size");
      initial_live[baddr] = {
          {baddr,
           bsize,
           requested != nullptr && requested->kind == Kind::kInt ? requested->integer : bsize},
          trace.slots++};
    }
  }

  // Each block live when recording began goes into the segment that holds it.
  int64_t initial_reserved = 0;
  std::map<int64_t, size_t> segment_of;  // address -> index into trace.initial_segments
  for (const auto& [address, s] : initial) {
    if (!trace.initial_segments.empty()) {
      const InitialSegment& before = trace.initial_segments.back();
      if (before.address + before.size > address)
        r.fail("segments at " + hex(before.address) + " and " + hex(address) + " overlap");
    }
    segment_of[address] = trace.initial_segments.size();
    trace.initial_segments.push_back({address, s.size, s.small, {}, {}});
    initial_reserved += s.size;
  }
  for (auto& [address, block_slot] : initial_live) {
    auto it = segment_of.upper_bound(address);
    InitialSegment* seg =
        it == segment_of.begin() ? nullptr : &trace.initial_segments[std::prev(it)->second];
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
  trace.recorded_reserved.reserve(reserved_delta.size());
  for (int64_t d : reserved_delta)
    trace.recorded_reserved.push_back(initial_reserved + d);
  return trace;
}

}  // namespace oomguard::sim
