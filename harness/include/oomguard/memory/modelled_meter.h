#pragma once
// ModelledMeter: the CPU meter with the caching-allocator model fed as the run goes
// (`--allocator-model cuda`): an emulated card refuses an allocation when the CUDA caching
// allocator would, fragmentation included, and reserved memory is reported as predicted.
// What only a CUDA run allocates is added where it happens: a cuBLAS workspace at the first
// GEMM of the forward and at the first GEMM of the backward (sim::cublas_workspace).
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include <oomguard/memory/tracking_allocator.h>
#include <oomguard/sim/caching_allocator.h>

namespace oomguard::memory {

class ModelledMeter final : public Meter, public AllocationObserver {
 public:
  // Observes `tracker` from here on; `device` is the card the model fills (its total and
  // what the driver can hand out; set_capacity adds the memory fraction).
  // `workspace_bytes` > 0: the bytes of one cuBLAS workspace, which the model allocates, and
  // keeps, at the end of the first GEMM (aten::mm, addmm, bmm, ...) outside autograd's
  // backward and of the first inside it: a CUDA run's two cuBLAS handles (forward thread,
  // autograd's device thread). One such meter at a time watches GEMMs, through RecordFunction
  // callbacks registered once per process (every operator then passes through them).
  ModelledMeter(
      TrackingAllocator& tracker,
      const sim::AllocatorSettings& settings,
      const sim::DeviceLimits& device,
      int64_t workspace_bytes = 0);
  ~ModelledMeter() override;
  ModelledMeter(const ModelledMeter&) = delete;
  ModelledMeter& operator=(const ModelledMeter&) = delete;

  std::string name() const override { return "cpu+cuda-model"; }
  // Allocated: the CPU meter's bytes (what the run asked for); reserved, retries, OOMs and the
  // predicted allocated bytes: the model's.
  MemoryStats stats() const override;
  void reset_peak() override;
  // The emulated card as the CUDA meter sets it: the allocator's memory fraction (reserved +
  // new segment > bytes fails; 0 for none).
  void set_capacity(int64_t bytes) override;
  void release_cache() override;

  void on_alloc(int64_t id, int64_t bytes) override;  // throws c10::OutOfMemoryError
  void on_free(int64_t id) override;

  // The workspaces allocated so far (0, 1 or 2 of them), in bytes.
  int64_t workspace_bytes_allocated() const;
  // Whether the backward's (true) or the forward's (false) workspace is allocated.
  bool workspace_taken(bool backward) const;
  // Called at the end of a GEMM (inside_backward: within an autograd node): allocates that
  // handle's workspace the first time. A refusal (OOM) is raised by the next allocation of
  // the run, since RecordFunction swallows what its callbacks throw.
  void on_gemm(bool inside_backward);

 private:
  TrackingAllocator& tracker_;
  mutable std::mutex mutex_;
  sim::CachingAllocator model_;
  std::unordered_map<int64_t, sim::CachingAllocator::Handle> blocks_;
  int64_t workspace_bytes_ = 0;
  bool workspace_taken_[2] = {false, false};  // forward's, backward's
  int64_t workspaces_allocated_ = 0;
  std::string pending_oom_;
};

}  // namespace oomguard::memory
