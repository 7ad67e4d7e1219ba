#pragma once
// TraceRecorder: writes each allocation and free the CPU meter sees to a JSON Lines trace
// (<oomguard/sim/trace.h>), with the phase, step and tag of its site (alloc_site.h).
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <unordered_map>

#include <oomguard/memory/tracking_allocator.h>
#include <oomguard/sim/trace.h>

namespace oomguard::memory {

class TraceRecorder final : public AllocationObserver {
 public:
  // Opens `path` for writing; throws std::runtime_error naming it when that fails. From then
  // on the first matrix product of the forward and of autograd's backward are marked too
  // (gemm events, through the operator callbacks the allocator model uses), so a replay can
  // add a CUDA run's cuBLAS workspaces where they were taken.
  explicit TraceRecorder(const std::string& path);
  // Records in memory instead of a file (take_trace()): the same events as a sim::Trace,
  // each free also with the step it was made in (TraceEvent::step), so a phase can be cut
  // into its steps (oomguard run --worst-case searches orders of them).
  TraceRecorder();
  ~TraceRecorder() override;
  TraceRecorder(const TraceRecorder&) = delete;
  TraceRecorder& operator=(const TraceRecorder&) = delete;

  void on_alloc(int64_t id, int64_t bytes) override;
  void on_free(int64_t id) override;
  // A matrix product ended (inside_backward: within an autograd node): marked the first time.
  void on_gemm(bool inside_backward);
  // Writes the `bytes` live before this recorder watched as one allocation (id 0, tag
  // "(before the trace)") that is never freed, so a replay starts from what the meter counted.
  // MeterStack calls it when it adds the recorder.
  void record_live_before(int64_t bytes);
  // Flushes and closes; throws std::runtime_error when the trace could not be written. Events
  // after it are dropped.
  void close();
  int64_t events() const { return events_; }
  // In memory: what was recorded so far (to a file: an empty trace); the recorder starts
  // again from nothing, frees of what it recorded before then left out.
  sim::Trace take_trace();
  // In memory: a copy of what was recorded so far; the recording goes on.
  sim::Trace trace_so_far();
  // The caching allocator's cache was emptied (the model's, as torch.cuda.empty_cache()): in
  // memory an empty-cache event, so a replay empties its pool there too; a file's JSON Lines
  // have no such event and leave it out.
  void on_empty_cache();

 private:
  void write(const std::string& line);
  void mark_phase();
  // In memory: the event, with the site's phase (and tag), under the recorder's lock.
  void keep(sim::TraceEvent event, const char* tag = nullptr);

  std::mutex mutex_;  // allocations come under the tracker's lock, GEMMs from any thread
  std::string path_;
  std::FILE* file_;
  bool gemm_marked_[2] = {false, false};  // the forward's, the backward's
  const char* phase_ = nullptr;           // the phase the last event was in
  int64_t events_ = 0;
  bool failed_ = false;
  // In memory (no file): the trace so far, its live ids' slots, its names' indices.
  bool in_memory_ = false;
  sim::Trace trace_;
  std::unordered_map<int64_t, int32_t> live_slots_;
  std::unordered_map<std::string, int32_t> phase_index_, tag_index_;
};

}  // namespace oomguard::memory
