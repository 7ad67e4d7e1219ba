#include <oomguard/memory/trace_recorder.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <oomguard/memory/alloc_site.h>
#include <oomguard/sim/trace.h>
#include "harness/memory/operator_callbacks.h"

namespace oomguard::memory {

TraceRecorder::TraceRecorder(const std::string& path)
    : path_(path), file_(std::fopen(path.c_str(), "w")) {
  if (file_ == nullptr)
    throw std::runtime_error(
        "cannot write the trace " + path + ": " + std::strerror(errno) +
        "; hint: check that its directory exists and is writable");
  std::setvbuf(file_, nullptr, _IOFBF, 1 << 20);
  watch_gemms_for(this);
}

TraceRecorder::TraceRecorder() : file_(nullptr), in_memory_(true) {
  trace_.tags.emplace_back();
  watch_gemms_for(this);
}

TraceRecorder::~TraceRecorder() {
  unwatch_gemms_for(this);  // waits for a callback writing to this recorder
  if (file_ != nullptr)
    std::fclose(file_);
}

void TraceRecorder::on_gemm(bool inside_backward) {
  std::lock_guard<std::mutex> lock(mutex_);
  bool& marked = gemm_marked_[inside_backward ? 1 : 0];
  if (marked)
    return;
  marked = true;
  mark_phase();
  if (in_memory_)
    keep(sim::TraceEvent::gemm(inside_backward, 0));
  else
    write(sim::gemm_line(inside_backward));
}

void TraceRecorder::keep(sim::TraceEvent event, const char* tag) {
  const AllocSite site = alloc_site();
  const auto index = [](std::unordered_map<std::string, int32_t>& names,
                        std::vector<std::string>& list,
                        const char* name) {
    const auto [it, added] =
        names.try_emplace(name == nullptr ? "" : name, static_cast<int32_t>(list.size()));
    if (added)
      list.push_back(it->first);
    return it->second;
  };
  if (event.op == sim::TraceEvent::Op::kPhase || event.op == sim::TraceEvent::Op::kAlloc)
    event.phase = index(phase_index_, trace_.phases, site.phase);
  if (event.op == sim::TraceEvent::Op::kAlloc)
    event.tag = index(tag_index_, trace_.tags, tag);
  if (event.op == sim::TraceEvent::Op::kFree)
    event.step = site.step;
  event.line = static_cast<int64_t>(trace_.events.size()) + 1;
  trace_.events.push_back(event);
  ++events_;
}

sim::Trace TraceRecorder::take_trace() {
  std::lock_guard<std::mutex> lock(mutex_);
  sim::Trace taken = std::move(trace_);
  trace_ = sim::Trace();
  trace_.tags.emplace_back();
  live_slots_.clear();
  phase_index_.clear();
  tag_index_.clear();
  phase_ = nullptr;
  return taken;
}

sim::Trace TraceRecorder::trace_so_far() {
  std::lock_guard<std::mutex> lock(mutex_);
  return trace_;
}

void TraceRecorder::on_empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (in_memory_)
    keep(sim::TraceEvent::empty_cache(0));
}

void TraceRecorder::write(const std::string& line) {
  if (file_ == nullptr)
    return;  // closed
  if (std::fputs(line.c_str(), file_) < 0 || std::fputc('\n', file_) == EOF)
    failed_ = true;
  ++events_;
}

// A phase event wherever the site's phase changed since the last event: the replay's
// per-phase peaks then start exactly where the meter's did, frees included.
void TraceRecorder::mark_phase() {
  const char* phase = alloc_site().phase;
  if (phase != phase_) {
    phase_ = phase;
    if (in_memory_)
      keep(sim::TraceEvent::phase_start(0, 0));
    else
      write(sim::phase_line(phase));
  }
}

void TraceRecorder::on_alloc(int64_t id, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  mark_phase();
  const AllocSite site = alloc_site();
  if (!in_memory_) {
    write(sim::alloc_line(id, bytes, site.phase, site.step, allocation_tag(site)));
    return;
  }
  const int32_t slot = trace_.slots++;
  live_slots_[id] = slot;
  keep(sim::TraceEvent::alloc(slot, bytes, id, 0, 0, site.step, 0), allocation_tag(site));
}

void TraceRecorder::on_free(int64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!in_memory_) {
    mark_phase();
    write(sim::free_line(id));
    return;
  }
  const auto it = live_slots_.find(id);
  if (it == live_slots_.end())
    return;  // recorded before take_trace()
  mark_phase();
  keep(sim::TraceEvent::free(it->second, id, 0));
  live_slots_.erase(it);
}

void TraceRecorder::record_live_before(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  mark_phase();
  if (in_memory_) {
    const int32_t slot = trace_.slots++;
    keep(sim::TraceEvent::alloc(slot, bytes, 0, 0, 0, -1, 0), "(before the trace)");
    return;
  }
  write(sim::alloc_line(/*id=*/0, bytes, alloc_site().phase, /*step=*/-1, "(before the trace)"));
}

void TraceRecorder::close() {
  unwatch_gemms_for(this);
  std::lock_guard<std::mutex> lock(mutex_);
  if (file_ == nullptr)
    return;
  const bool flushed = std::fflush(file_) == 0;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (failed_ || !flushed || !closed)
    throw std::runtime_error("could not write the whole trace " + path_ + " (disk full?)");
}

}  // namespace oomguard::memory
