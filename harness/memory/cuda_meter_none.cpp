// The CUDA meter of a build against a CPU-only LibTorch: there is none, and it says so.
#include <stdexcept>

#include <oomguard/memory/cuda_meter.h>

namespace oomguard::memory {

bool cuda_meter_built() {
  return false;
}

int cuda_device_count() {
  return 0;
}

CudaMeter::CudaMeter(int device) : device_(device) {
  throw std::invalid_argument(
      "this oomguard was built against a CPU-only LibTorch: no CUDA meter; rebuild against a "
      "LibTorch with CUDA");
}

MemoryStats CudaMeter::stats() const {
  return {};
}

void CudaMeter::reset_peak() {}

void CudaMeter::set_capacity(int64_t) {}

void CudaMeter::release_cache() {}

}  // namespace oomguard::memory
