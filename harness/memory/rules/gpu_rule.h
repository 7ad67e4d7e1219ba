#pragma once
// A CPU-to-GPU rule of the allocator model (ModelledMeter): what a CUDA run of the same code
// allocates that the CPU run does not, or allocates otherwise, fed to the targets' models
// where it happens; <oomguard/sim/gpu_rules.h> says what and how much. One file a rule in
// harness/memory/rules/, listed in make_rules (gpu_rule.cpp). The meter calls its rules with
// its mutex held: from the tracker's allocations and frees, and from the process-wide
// operator callbacks (operator_callbacks.h) for the operators a rule hears.
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <oomguard/memory/modelled_meter.h>
#include <oomguard/sim/gpu_rules.h>
#include "harness/memory/operator_callbacks.h"

namespace at {
struct RecordFunction;
}

namespace oomguard::memory {

// The targets' allocator models, as a rule feeds them (the meter's side of the interface).
class RuleModels {
 public:
  virtual size_t size() const = 0;
  virtual const ModelTarget& target(size_t i) const = 0;
  // Serves `bytes` in target `i`'s model under `id`; false when refused. Called from operator
  // callbacks, which cannot throw: the first target's refusal is raised as an OOM by the
  // run's next allocation.
  virtual bool serve(size_t i, int64_t id, int64_t bytes) = 0;
  // Frees `id` in target `i`'s model, if it holds it.
  virtual void release(size_t i, int64_t id) = 0;

 protected:
  ~RuleModels() = default;
};

// An id no CPU allocation has (negative, unique in the process): what only the card allocates.
int64_t card_only_id();

class GpuRule {
 public:
  virtual ~GpuRule() = default;

  // Whether the operator `name` beginning or ending on this thread concerns the rule. Asked
  // for every operator without the meter's mutex: from the rule's constants and this
  // thread's state only.
  virtual bool hears(const char* /*name*/) const { return false; }
  virtual void on_operator_start(const at::RecordFunction& /*fn*/) {}
  virtual void on_operator_end(const at::RecordFunction& /*fn*/, bool /*inside_backward*/) {}
  // Every autograd node's backward, its start and end; a node the rule hooked is gone.
  virtual void on_backward_node(const NodeKey& /*node*/, bool /*start*/) {}
  virtual void on_node_released(int64_t /*token*/) {}

  // A CPU allocation about to be fed: sets held[i] for each target the rule holds it back
  // from (the card allocates something else in its place).
  virtual void hold_back(std::vector<bool>& /*held*/) {}
  // That allocation was made (the first target did not refuse it).
  virtual void on_alloc(int64_t /*id*/, int64_t /*bytes*/) {}
  // A CPU free: sets taken[i] for each target whose free of `id` the rule makes later itself.
  virtual void on_free(int64_t /*id*/, std::vector<bool>& /*taken*/) {}

  // A phase begins (the meter's reset_peak): effect() counts from here.
  virtual void on_phase_start() {}
  // What the rule did in target `i` since the phase began; none where it is off there.
  virtual std::optional<sim::RuleEffect> effect(size_t i) const = 0;
};

// The rules some of `models`' targets apply, in the order the report lists them; each feeds
// `models`, which outlives it.
std::vector<std::unique_ptr<GpuRule>> make_rules(RuleModels& models);

// The rules, one file each: null where no target applies it.
std::unique_ptr<GpuRule> cublas_workspace_rule(RuleModels& models);  // cublas_workspace.cpp
std::unique_ptr<GpuRule> sdpa_attention_rule(RuleModels& models);    // sdpa_attention.cpp
std::unique_ptr<GpuRule> cpu_scratch_rule(RuleModels& models);       // cpu_scratch.cpp

// The cuBLAS workspaces target `i`'s model holds; all false and 0 when `rule` is not the
// cublas_workspace rule.
struct Workspaces {
  bool forward = false, backward = false;  // each handle's, allocated and kept
  int64_t bytes = 0;
};
Workspaces workspaces(const GpuRule& rule, size_t i);

}  // namespace oomguard::memory
