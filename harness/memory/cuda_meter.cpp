#include <oomguard/memory/cuda_meter.h>

#include <stdexcept>

#include <ATen/ops/empty.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <oomguard/memory/sizes.h>

namespace oomguard::memory {
namespace {

namespace allocator = c10::cuda::CUDACachingAllocator;

// The allocator's device argument: int in LibTorch 1.13, c10::DeviceIndex from 2.0.
#if TORCH_VERSION_MAJOR >= 2
using AllocatorDevice = c10::DeviceIndex;
#else
using AllocatorDevice = int;
#endif

// Index of the aggregate (all pools) entry of every StatArray: StatType::AGGREGATE, which
// moved namespace in 2.5 but kept its value, so the literal serves every version.
constexpr size_t kAggregate = 0;

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw std::runtime_error(std::string("CUDA ") + what + ": " + cudaGetErrorString(status));
}

}  // namespace

bool cuda_meter_built() {
  return true;
}

int cuda_device_count() {
  return static_cast<int>(torch::cuda::device_count());
}

CudaMeter::CudaMeter(int device) : device_(device) {
  // A first tensor initialises CUDA and the allocator's per-device state on `device`.
  (void)at::empty({1}, at::TensorOptions().device(c10::Device(c10::kCUDA, device)));
  check(cudaSetDevice(device), "cudaSetDevice");
  size_t free_bytes = 0, total_bytes = 0;
  check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  cudaDeviceProp props{};
  check(cudaGetDeviceProperties(&props, device), "cudaGetDeviceProperties");
  device_name_ = props.name;
  device_total_bytes_ = static_cast<int64_t>(total_bytes);
}

MemoryStats CudaMeter::stats() const {
  const auto s = allocator::getDeviceStats(static_cast<AllocatorDevice>(device_));
  MemoryStats m;
  m.allocated_bytes = s.allocated_bytes[kAggregate].current;
  m.peak_allocated_bytes = s.allocated_bytes[kAggregate].peak;
  m.reserved_bytes = s.reserved_bytes[kAggregate].current;
  m.peak_reserved_bytes = s.reserved_bytes[kAggregate].peak;
  m.num_alloc_retries = s.num_alloc_retries;
  m.num_ooms = s.num_ooms;
  return m;
}

void CudaMeter::reset_peak() {
  allocator::resetPeakStats(static_cast<AllocatorDevice>(device_));
}

void CudaMeter::set_capacity(int64_t bytes) {
  if (bytes > device_total_bytes_)
    throw std::invalid_argument(
        "emulated card of " + format_size(bytes) + " is larger than this " + device_name_ + " (" +
        format_size(device_total_bytes_) + "); it cannot be emulated here");
  // The allocator refuses a reservation taking reserved above fraction x total (the total
  // that cudaMemGetInfo reports), through the same release-and-retry path as a real OOM.
  const double fraction =
      bytes > 0 ? static_cast<double>(bytes) / static_cast<double>(device_total_bytes_) : 1.0;
  allocator::setMemoryFraction(fraction, static_cast<AllocatorDevice>(device_));
}

void CudaMeter::release_cache() {
  allocator::emptyCache();
}

}  // namespace oomguard::memory
