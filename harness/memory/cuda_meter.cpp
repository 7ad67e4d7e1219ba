#include <oomguard/memory/cuda_meter.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include <ATen/ops/empty.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>
#include <torch/csrc/cuda/memory_snapshot.h>
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

// "12.8" from CUDA's 12080.
std::string cuda_version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

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

std::string cuda_unavailable_reason() {
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);  // 0 when no driver is loaded
  cudaRuntimeGetVersion(&runtime);
  if (driver == 0)
    return "no NVIDIA driver is loaded (libcuda.so.1 or the kernel module is missing)";
  // CUDA's minor-version compatibility lets a driver of the same major run a newer minor
  // runtime; a driver of an older major cannot (the oldest driver of each major: NVIDIA's
  // CUDA Toolkit release notes, table 3).
  if (driver / 1000 < runtime / 1000) {
    const char* needs = runtime / 1000 >= 13 ? "580.65.06" : "525.60.13";
    return "the NVIDIA driver supports CUDA " + cuda_version_text(driver) +
           " and this LibTorch is built for CUDA " + cuda_version_text(runtime) +
           ": it needs driver " + needs +
           " or newer, or a torch wheel built for the driver's CUDA (README, GPU runners)";
  }
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess && status != cudaErrorNoDevice)
    return std::string("CUDA cannot start: ") + cudaGetErrorString(status);
  if (count == 0 || cuda_device_count() == 0) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    return std::string("no CUDA device is visible (CUDA_VISIBLE_DEVICES ") +
           (visible ? std::string("is '") + visible + "'" : std::string("is unset")) + ")";
  }
  return "";
}

int cuda_compute_capability(int device) {
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess)
    return 0;
  return major * 10 + minor;
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

CudaSegments CudaMeter::segments() const {
  CudaSegments out;
  for (const auto& segment : allocator::snapshot().segments) {
    if (segment.device != device_)
      continue;
    ++out.segments;
    if (segment.is_expandable)
      ++out.expandable;
  }
  return out;
}

void CudaMeter::record_history() {
  // enabled "all" (allocations and segments), no context or stacks: the sizes, addresses and
  // order of events, which is what a replay reads, without the cost of unwinding.
  torch::cuda::_record_memory_history(
      std::optional<std::string>("all"), std::optional<std::string>(), std::string("python"));
}

std::string CudaMeter::snapshot_pickle() const {
  return torch::cuda::_memory_snapshot_pickled();
}

void CudaMeter::release_cache() {
  allocator::emptyCache();
}

}  // namespace oomguard::memory
