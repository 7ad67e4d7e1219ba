#pragma once
// CUDA meter: the caching allocator's own statistics for one device. Compiled into every
// build against a whole LibTorch with CUDA and a CUDA toolkit (cuda_meter.cpp) and chosen at
// run time; against a CPU-only LibTorch, or the CPU half of a CUDA one (no toolkit),
// cuda_meter_none.cpp says so instead.
#include <cstdint>
#include <string>

#include <oomguard/memory/meter.h>

namespace oomguard::memory {

// Whether this build carries the CUDA meter (its LibTorch has CUDA).
bool cuda_meter_built();
// CUDA devices visible to this process: 0 without a driver, a device or CUDA in LibTorch.
int cuda_device_count();
// Why no CUDA device can be measured here, in one sentence that names the remedy: a build
// without the CUDA meter (how to get one), no NVIDIA driver, a driver too old for this
// LibTorch's CUDA (which driver it needs), no visible device. "" when one can.
std::string cuda_unavailable_reason();
// The compute capability of CUDA device `device` as one number (75 for sm_75); 0 when there
// is no such device or no CUDA meter in this build.
int cuda_compute_capability(int device);

// The caching allocator's segments on one device, read back from the allocator itself
// (its snapshot): whether a setting such as expandable_segments took effect shows here, not
// in the environment variable that asked for it.
struct CudaSegments {
  int64_t segments = 0;    // segments the allocator holds now
  int64_t expandable = 0;  // of which expandable (one mapped range that grows)
};

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
  // The allocator's segments on this device now.
  CudaSegments segments() const;
  // From now on the allocator records every allocation and free (no stacks), for
  // snapshot_pickle: PyTorch's own memory snapshot (torch::cuda::_memory_snapshot_pickled),
  // which torch.cuda._memory_viz and `oomguard replay` read.
  void record_history();
  std::string snapshot_pickle() const;

  int device() const { return device_; }
  const std::string& device_name() const { return device_name_; }
  int64_t device_total_bytes() const { return device_total_bytes_; }

 private:
  int device_;
  std::string device_name_;
  int64_t device_total_bytes_ = 0;
};

}  // namespace oomguard::memory
