#pragma once
// ModelledMeter: the CPU meter with the caching-allocator model fed as the run goes
// (`--allocator-model cuda`): an emulated card refuses an allocation when the CUDA caching
// allocator would, fragmentation included, and reserved memory is reported as predicted.
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include <oomguard/memory/tracking_allocator.h>
#include <oomguard/sim/caching_allocator.h>

namespace oomguard::memory {

class ModelledMeter final : public Meter, public AllocationObserver {
 public:
  // Observes `tracker` from here on; `device` is the card the model fills (its total and
  // what the driver can hand out; set_capacity adds the memory fraction).
  ModelledMeter(
      TrackingAllocator& tracker,
      const sim::AllocatorSettings& settings,
      const sim::DeviceLimits& device);
  ~ModelledMeter() override;
  ModelledMeter(const ModelledMeter&) = delete;
  ModelledMeter& operator=(const ModelledMeter&) = delete;

  std::string name() const override { return "cpu+cuda-model"; }
  // Allocated: the CPU meter's bytes (what the run asked for); reserved, retries and OOMs:
  // the model's.
  MemoryStats stats() const override;
  void reset_peak() override;
  // The emulated card as the CUDA meter sets it: the allocator's memory fraction (reserved +
  // new segment > bytes fails; 0 for none).
  void set_capacity(int64_t bytes) override;
  void release_cache() override;

  void on_alloc(int64_t id, int64_t bytes) override;  // throws c10::OutOfMemoryError
  void on_free(int64_t id) override;

 private:
  TrackingAllocator& tracker_;
  mutable std::mutex mutex_;
  sim::CachingAllocator model_;
  std::unordered_map<int64_t, sim::CachingAllocator::Handle> blocks_;
};

}  // namespace oomguard::memory
