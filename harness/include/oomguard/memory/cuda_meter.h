#pragma once
// CUDA meter: the caching allocator's own statistics for one device. Compiled into every
// build against a LibTorch with CUDA (cuda_meter.cpp) and chosen at run time; against a
// CPU-only LibTorch, cuda_meter_none.cpp says so instead.
#include <cstdint>
#include <string>

#include <oomguard/memory/meter.h>

namespace oomguard::memory {

// Whether this build carries the CUDA meter (its LibTorch has CUDA).
bool cuda_meter_built();
// CUDA devices visible to this process: 0 without a driver, a device or CUDA in LibTorch.
int cuda_device_count();

class CudaMeter final : public Meter {
 public:
  // Initialises CUDA on `device` (the allocator's statistics exist from then on).
  explicit CudaMeter(int device);

  std::string name() const override { return "cuda"; }
  MemoryStats stats() const override;
  void reset_peak() override;
  // Sets the per-process memory fraction to bytes / device total; 0 lifts it. Throws
  // std::invalid_argument when the device is smaller than `bytes`.
  void set_capacity(int64_t bytes) override;
  void release_cache() override;

  int device() const { return device_; }
  const std::string& device_name() const { return device_name_; }
  int64_t device_total_bytes() const { return device_total_bytes_; }

 private:
  int device_;
  std::string device_name_;
  int64_t device_total_bytes_ = 0;
};

}  // namespace oomguard::memory
