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
  int64_t num_alloc_retries = 0;
  int64_t num_ooms = 0;
};

class Meter {
 public:
  virtual ~Meter() = default;
  virtual std::string name() const = 0;
  virtual MemoryStats stats() const = 0;
  // Peak := current allocated.
  virtual void reset_peak() = 0;
};

}  // namespace oomguard::memory
