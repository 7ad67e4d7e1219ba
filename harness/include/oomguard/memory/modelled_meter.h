#pragma once
// ModelledMeter: the CPU meter with the caching-allocator model fed as the run goes
// (`--allocator-model cuda`, and the GoogleTest layer with a card on CPU): an emulated card
// refuses an allocation when the CUDA caching allocator would, fragmentation included, and
// reserved memory is reported as predicted. What a CUDA run allocates differently is added
// where it happens, by the rules of <oomguard/sim/gpu_rules.h>, one unit each behind one
// interface (harness/memory/rules/): a cuBLAS workspace at the first GEMM of the forward and
// at the first GEMM of the backward (sim::cublas_workspace); in and after scaled-dot-product
// attention, what the card's kernel keeps instead of what the CPU's kept
// (sim::cuda_attention); in a CPU convolution, LSTM or upsampling kernel, its outputs alone
// (sim::is_cpu_scratch_operator). The allocations come from a TrackingAllocator: the CPU's, or the
// Meta device's (TrackingAllocator::meta(), shapes alone).
// Several cards and allocator settings can be predicted side by side from one run.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <oomguard/memory/tracking_allocator.h>
#include <oomguard/sim/caching_allocator.h>
#include <oomguard/sim/gpu_rules.h>

namespace oomguard::memory {

class GpuRule;

// One card (or capacity) and allocator setting to predict for.
struct ModelTarget {
  std::string card;            // a card profile (<oomguard/memory/cards.h>); "" for a capacity
  int64_t capacity_bytes = 0;  // the most the process may reserve (memory fraction); 0: none
  std::string alloc_conf;      // the settings as given ("" for LibTorch's defaults)
  sim::AllocatorSettings settings;
  sim::DeviceLimits device;  // the card's total and what its driver hands out
  int sm = 0;                // the card's compute capability (kDefaultModelSm without one)
  sim::TorchVersion torch;   // the LibTorch whose choices the rules follow
  // The cuBLAS workspace rule: bytes_per_handle 0 when the rule is off.
  sim::CublasWorkspace workspace;
  bool attention = false;    // the sdpa_attention rule (sim::cuda_attention)
  bool cpu_scratch = false;  // the cpu_scratch rule (sim::is_cpu_scratch_operator)

  // "t4", "t4 expandable_segments:True", "12GiB": the card or capacity, then the settings.
  std::string label() const;
};

// The target for `card` (a profile name; "" for a capacity alone, modelled as a card of
// compute capability kDefaultModelSm) or `capacity_bytes`, with allocator settings
// `alloc_conf` as LibTorch `torch` reads them and `rules` (the workspace's size from
// CUBLAS_WORKSPACE_CONFIG where the environment sets it: sim::cublas_workspace_rule);
// neither a card nor a capacity: a device without limit. Throws std::invalid_argument for an
// unknown card, malformed settings or workspace config.
ModelTarget model_target(
    const std::string& card,
    int64_t capacity_bytes,
    const std::string& alloc_conf,
    sim::TorchVersion torch,
    const sim::GpuRules& rules = {});

// What one target predicted since the last reset_peak.
struct ModelFigures {
  int64_t peak_allocated_bytes = 0;  // blocks handed out: rounding, slack and workspaces
  int64_t peak_reserved_bytes = 0;   // segments held: what must fit on the card
  int64_t num_alloc_retries = 0;     // the cache freed and the request tried again
  int64_t largest_gap_bytes = 0;     // most reserved minus allocated as a request was served
  int64_t workspace_bytes = 0;       // the cuBLAS workspaces held now (cublas_workspace)
  // The rules applied and what they did in the phase: {"cublas_workspace", bytes held,
  // "2 handles x ..."}, {"sdpa_attention", bytes kept for backward, "3 call(s): ..."},
  // {"cpu_scratch", 0, "4 CPU kernel call(s) ...: left out ..."}.
  std::vector<sim::RuleEffect> rules;
  // The first refusal's message (LibTorch's words), or "". A target other than the first
  // that refused before this phase says "ran out of memory earlier: " and that message: the
  // run went on with what it refused, so its figures since are not the card's.
  std::string oom;
};

class ModelledMeter final : public Meter, public AllocationObserver {
 public:
  // Observes `tracker` from here on and predicts every target; the first is the meter's own:
  // stats() reports it, set_capacity() changes it, and an allocation it refuses throws
  // c10::OutOfMemoryError as the card would. The others only record their first refusal.
  // A target with a workspace allocates one, and keeps it, at the end of the first GEMM
  // (aten::mm, addmm, bmm, ...) outside autograd's backward and of the first inside it: a
  // CUDA run's two cuBLAS handles (forward thread, autograd's device thread). A meter whose
  // targets apply a rule watches operators, through RecordFunction callbacks registered once
  // per process (every operator then passes through them); one such meter at a time: throws
  // std::logic_error while another watches.
  ModelledMeter(TrackingAllocator& tracker, const std::vector<ModelTarget>& targets);
  // One target of `device` (its capacity from set_capacity) with `workspace_bytes` per handle.
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
  // predicted allocated bytes: the first target's.
  MemoryStats stats() const override;
  void reset_peak() override;  // every target's
  // The emulated card as the CUDA meter sets it: the first target's memory fraction
  // (reserved + new segment > bytes fails; 0 for none).
  void set_capacity(int64_t bytes) override;
  void release_cache() override;  // every target's
  // Forgets what the targets refused so far (outside every phase, e.g. the GoogleTest layer's
  // workspace warm-up): no phase carries it as "ran out of memory earlier", and nothing
  // refused is raised by the next allocation. What was refused stays unallocated.
  void forget_refusals();

  void on_alloc(int64_t id, int64_t bytes) override;  // throws c10::OutOfMemoryError
  void on_free(int64_t id) override;

  size_t targets() const;
  const ModelTarget& target(size_t i) const;
  ModelFigures figures(size_t i) const;

  // The first target's workspaces allocated so far (0, 1 or 2 of them), in bytes.
  int64_t workspace_bytes_allocated() const;
  // Whether the first target's backward (true) or forward (false) workspace is allocated.
  bool workspace_taken(bool backward) const;

 private:
  class Models;   // the targets' allocator models, as the rules feed them
  class Watcher;  // hears operators for the rules

  TrackingAllocator& tracker_;
  mutable std::mutex mutex_;  // guards the models and the rules
  std::unique_ptr<Models> models_;
  // The CPU-to-GPU rules some target applies (harness/memory/rules/), in the report's order.
  std::vector<std::unique_ptr<GpuRule>> rules_;
  std::vector<bool> held_, taken_;    // per target, for on_alloc and on_free
  std::unique_ptr<Watcher> watcher_;  // none when no rule hears operators
};

}  // namespace oomguard::memory
