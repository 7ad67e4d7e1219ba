#pragma once
// Google Benchmark's MemoryManager over the tracking allocator: max_bytes_used is the peak of
// allocated bytes above what was allocated when the measured run started.
#include <benchmark/benchmark.h>

#include <oomguard/memory/tracking_allocator.h>

namespace oomguard::bench {

class TrackedMemory final : public benchmark::MemoryManager {
 public:
  void Start() override;
  void Stop(Result& result) override;
  void Stop(Result* result) override { Stop(*result); }  // the pre-1.8 entry point

 private:
  int64_t start_allocated_ = 0;
  int64_t start_allocations_ = 0;
  int64_t start_total_ = 0;
};

}  // namespace oomguard::bench
