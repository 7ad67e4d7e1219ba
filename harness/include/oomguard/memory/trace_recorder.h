#pragma once
// TraceRecorder: writes each allocation and free the CPU meter sees to a JSON Lines trace
// (<oomguard/sim/trace.h>), with the phase, step and tag of its site (alloc_site.h).
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>

#include <oomguard/memory/tracking_allocator.h>

namespace oomguard::memory {

class TraceRecorder final : public AllocationObserver {
 public:
  // Opens `path` for writing; throws std::runtime_error naming it when that fails. From then
  // on the first matrix product of the forward and of autograd's backward are marked too
  // (gemm events, through the operator callbacks the allocator model uses), so a replay can
  // add a CUDA run's cuBLAS workspaces where they were taken.
  explicit TraceRecorder(const std::string& path);
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

 private:
  void write(const std::string& line);
  void mark_phase();

  std::mutex mutex_;  // allocations come under the tracker's lock, GEMMs from any thread
  std::string path_;
  std::FILE* file_;
  bool gemm_marked_[2] = {false, false};  // the forward's, the backward's
  const char* phase_ = nullptr;           // the phase the last event was in
  int64_t events_ = 0;
  bool failed_ = false;
};

}  // namespace oomguard::memory
