#include <oomguard/memory/phase_scope.h>

namespace oomguard::memory {

PhaseScope::PhaseScope(Meter& meter, PhaseMemory& record)
    : meter_(meter), record_(record), start_(std::chrono::steady_clock::now()) {
  meter_.reset_peak();
  const MemoryStats s = meter_.stats();
  record_.start_allocated_bytes = s.allocated_bytes;
  retries_at_start_ = s.num_alloc_retries;
}

PhaseScope::~PhaseScope() {
  const MemoryStats s = meter_.stats();
  record_.peak_allocated_bytes = s.peak_allocated_bytes;
  record_.end_allocated_bytes = s.allocated_bytes;
  record_.peak_reserved_bytes = s.peak_reserved_bytes;
  record_.predicted_peak_allocated_bytes = s.predicted_peak_allocated_bytes;
  record_.num_alloc_retries = s.num_alloc_retries - retries_at_start_;
  record_.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

}  // namespace oomguard::memory
