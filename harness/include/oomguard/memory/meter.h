#pragma once
// Meter: where the figures of a phase come from (CPU tracking allocator, CUDA stats).
#include <cstdint>
#include <string>

namespace oomguard::memory {

struct MemoryStats {
  int64_t allocated_bytes = 0;
  int64_t peak_allocated_bytes = 0;
  int64_t reserved_bytes = -1;       // -1: not measured by this meter
  int64_t peak_reserved_bytes = -1;  // -1: not measured by this meter
  int64_t num_alloc_retries = 0;     // the allocator freed its cache to serve a request
  int64_t num_ooms = 0;
  // The caching-allocator model's allocated bytes (block sizes as the CUDA allocator rounds
  // them, and what only a CUDA run allocates, such as cuBLAS workspaces): what a CUDA run's
  // allocated figure is predicted to be. -1: no model.
  int64_t predicted_allocated_bytes = -1;
  int64_t predicted_peak_allocated_bytes = -1;
};

class Meter {
 public:
  virtual ~Meter() = default;
  // "cpu", "cuda" or "cpu+cuda-model": what the figures are of.
  virtual std::string name() const = 0;
  // The figures now, peaks since the last reset_peak().
  virtual MemoryStats stats() const = 0;
  // Peak := current (allocated, and reserved where measured).
  virtual void reset_peak() = 0;
  // The emulated card: the most this process may hold, 0 for no limit. CPU: an allocation
  // taking allocated above it throws; CUDA: the caching allocator's memory fraction, so a
  // reservation above it fails like a real OOM.
  virtual void set_capacity(int64_t bytes) = 0;
  // Hands cached, unused memory back to the device (CUDA's emptyCache); nothing on CPU.
  virtual void release_cache() {}
};

}  // namespace oomguard::memory
