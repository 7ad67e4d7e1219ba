// The CUDA meter of a build against a CPU-only LibTorch, or against the CPU half of a CUDA
// one (no CUDA toolkit): there is none, and it says so.
#include <stdexcept>
#include <string>

#include <oomguard/memory/cuda_meter.h>

namespace oomguard::memory {

bool cuda_meter_built() {
  return false;
}

int cuda_device_count() {
  return 0;
}

std::string cuda_unavailable_reason() {
#ifdef OOMGUARD_TORCH_CPU_HALF
  return "this oomguard was built without a CUDA toolkit (the CPU half of its LibTorch): no "
         "CUDA meter; install the CUDA toolkit LibTorch was built for (nvcc on PATH or "
         "CUDA_HOME) and build again, or configure with -DOOMGUARD_CUDA=ON to require it";
#else
  return "this oomguard was built against a CPU-only LibTorch: no CUDA meter; build it "
         "against a LibTorch with CUDA";
#endif
}

int cuda_compute_capability(int) {
  return 0;
}

CudaMeter::CudaMeter(int device) : device_(device) {
  throw std::invalid_argument(cuda_unavailable_reason());
}

MemoryStats CudaMeter::stats() const {
  return {};
}

void CudaMeter::reset_peak() {}

void CudaMeter::set_capacity(int64_t) {}

void CudaMeter::release_cache() {}

CudaSegments CudaMeter::segments() const {
  return {};
}

void CudaMeter::record_history() {}

std::string CudaMeter::snapshot_pickle() const {
  return "";
}

}  // namespace oomguard::memory
