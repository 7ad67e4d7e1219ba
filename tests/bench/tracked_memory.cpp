#include "tests/bench/tracked_memory.h"

namespace oomguard::bench {

void TrackedMemory::Start() {
  auto& meter = memory::TrackingAllocator::instance();
  meter.reset_peak();
  start_allocated_ = meter.stats().allocated_bytes;
  start_allocations_ = meter.num_allocations();
  start_total_ = meter.total_allocated_bytes();
}

void TrackedMemory::Stop(Result& result) {
  auto& meter = memory::TrackingAllocator::instance();
  const memory::MemoryStats s = meter.stats();
  result.max_bytes_used = s.peak_allocated_bytes - start_allocated_;
  result.num_allocs = meter.num_allocations() - start_allocations_;
  result.net_heap_growth = s.allocated_bytes - start_allocated_;
  result.total_allocated_bytes = meter.total_allocated_bytes() - start_total_;
}

}  // namespace oomguard::bench
