#pragma once
// PhaseScope: RAII measurement of one phase (peak reset on entry, figures on exit).
#include <chrono>
#include <cstdint>
#include <string>

#include <oomguard/memory/meter.h>

namespace oomguard::memory {

struct PhaseMemory {
  std::string name;
  int64_t start_allocated_bytes = 0;
  int64_t peak_allocated_bytes = 0;
  int64_t end_allocated_bytes = 0;
  int64_t peak_reserved_bytes = -1;
  int64_t predicted_peak_allocated_bytes = -1;  // the allocator model's (MemoryStats); -1: none
  int64_t num_alloc_retries = 0;
  double wall_seconds = 0.0;
};

// Fills `record` when it ends, also when the phase throws (an OOM keeps its peak).
class PhaseScope {
 public:
  PhaseScope(Meter& meter, PhaseMemory& record);
  ~PhaseScope();
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  Meter& meter_;
  PhaseMemory& record_;
  int64_t retries_at_start_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace oomguard::memory
