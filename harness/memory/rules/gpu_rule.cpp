#include "harness/memory/rules/gpu_rule.h"

#include <atomic>

namespace oomguard::memory {

int64_t card_only_id() {
  static std::atomic<int64_t> last{0};
  return -(last.fetch_add(1, std::memory_order_relaxed) + 1);
}

std::vector<std::unique_ptr<GpuRule>> make_rules(RuleModels& models) {
  using Factory = std::unique_ptr<GpuRule> (*)(RuleModels&);
  static constexpr Factory kRules[] = {
      cublas_workspace_rule, sdpa_attention_rule, cpu_scratch_rule};
  std::vector<std::unique_ptr<GpuRule>> rules;
  for (const Factory make : kRules)
    if (std::unique_ptr<GpuRule> rule = make(models))
      rules.push_back(std::move(rule));
  return rules;
}

}  // namespace oomguard::memory
