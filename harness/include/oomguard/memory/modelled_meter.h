#pragma once
// ModelledMeter: the CPU meter with the caching-allocator model fed as the run goes
// (`--allocator-model cuda`, and the GoogleTest layer with a card on CPU): an emulated card
// refuses an allocation when the CUDA caching allocator would, fragmentation included, and
// reserved memory is reported as predicted. What a CUDA run allocates differently is added
// where it happens, by the rules of <oomguard/sim/gpu_rules.h>: a cuBLAS workspace at the
// first GEMM of the forward and at the first GEMM of the backward (sim::cublas_workspace);
// in and after scaled-dot-product attention, what the card's kernel keeps instead of what the
// CPU's kept (sim::cuda_attention).
// Several cards and allocator settings can be predicted side by side from one run.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <oomguard/memory/tracking_allocator.h>
#include <oomguard/sim/caching_allocator.h>
#include <oomguard/sim/gpu_rules.h>

namespace at {
class Tensor;
}

namespace oomguard::memory {

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
  bool attention = false;  // the sdpa_attention rule (sim::cuda_attention)

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
  int64_t workspace_bytes = 0;       // the cuBLAS workspaces held now
  // The rules applied and what they did in the phase: {"cublas_workspace", bytes held,
  // "2 handles x ..."}, {"sdpa_attention", bytes kept for backward, "3 call(s): ..."}.
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
  // CUDA run's two cuBLAS handles (forward thread, autograd's device thread). One such meter
  // at a time watches GEMMs, through RecordFunction callbacks registered once per process
  // (every operator then passes through them).
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

  size_t targets() const { return models_.size(); }
  const ModelTarget& target(size_t i) const;
  ModelFigures figures(size_t i) const;

  // The first target's workspaces allocated so far (0, 1 or 2 of them), in bytes.
  int64_t workspace_bytes_allocated() const;
  // Whether the first target's backward (true) or forward (false) workspace is allocated.
  bool workspace_taken(bool backward) const;
  // Called by the operator callbacks. At the end of a GEMM (inside_backward: within an
  // autograd node): allocates that handle's workspace the first time. The first target's
  // refusal (OOM) is raised by the next allocation of the run, since RecordFunction swallows
  // what its callbacks throw.
  void on_gemm(bool inside_backward);
  // Around aten::scaled_dot_product_attention (the sdpa_attention rule): from its start, what
  // the CPU kernel allocates on this thread is held back from the targets whose card runs
  // another kernel (`inputs`: the storages of q, k and v); the CPU kernel is the math path or
  // its flash kernel; at its end, the output is fed and the card's kernel's kept tensors
  // (sim::cuda_attention) added, freed when its backward has run or its autograd node is
  // destroyed (at once without one).
  void on_attention_start(const sim::AttentionCall& call, const std::vector<int64_t>& inputs);
  void on_attention_cpu_kernel(bool math);
  void on_attention_end(const at::Tensor& output);
  // At the start and end of an autograd node's backward (`node`: its sequence number): the
  // nodes an attention call made are its backward, where the card's kernel's backward
  // allocates in place of the CPU's.
  // An autograd node: the thread that made it and its sequence number on that thread.
  using NodeKey = std::pair<uint64_t, uint64_t>;
  void on_backward_node(const NodeKey& node, bool start);
  // The call's autograd node is gone: what the card's kernel kept is freed.
  void release_attention(int64_t token);

 private:
  struct Model;
  // Serves `bytes` in `m` under `id`; false when refused (recorded as the model's OOM).
  bool serve(Model& m, int64_t id, int64_t bytes);
  // serve() from an operator callback, which cannot throw: the first target's refusal is
  // raised by the run's next allocation.
  bool serve_in_callback(Model& m, int64_t id, int64_t bytes);
  void release(Model& m, int64_t id);

  TrackingAllocator& tracker_;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Model>> models_;
  // An attention call whose backward is still to come.
  struct AttentionBackward {
    std::vector<std::pair<size_t, int64_t>> kept;      // the card's kept tensors: target, id
    std::vector<bool> held;                            // per target: the rule replaces its kernel
    std::vector<std::vector<int64_t>> transient;       // per target: its backward's temporaries
    std::vector<std::pair<size_t, int64_t>> deferred;  // kept inputs, freed: target, id
    int nodes = 0;                                     // the call's nodes yet to run
  };
  void end_attention_backward();
  // Ends this thread's backward window when its call is no longer known.
  void close_stale_capture();
  // This thread is inside an attention call's forward for this meter.
  bool in_attention_call() const;
  // Frees what the call's kernel kept and forgets the call.
  void forget_attention(int64_t token);

  uint64_t serial_;          // this meter among all the process made (from 1)
  std::string pending_oom_;  // the first target's refused workspace or kept tensor
  std::unordered_map<int64_t, AttentionBackward> attention_backward_;  // by token
  std::map<NodeKey, int64_t> attention_node_;                          // node -> token
  std::unordered_map<int64_t, int64_t> attention_pinned_;  // input's or output's id -> token
};

}  // namespace oomguard::memory
