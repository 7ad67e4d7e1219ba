#include "harness/run/cuda_budget.h"

#include <oomguard/memory/budgets.h>
#include <oomguard/memory/cards.h>
#include <oomguard/sim/gpu_rules.h>

namespace oomguard::run {

int64_t CudaBudget::extra_bytes() const {
  int64_t total = 0;
  for (const auto& rule : rules)
    total += rule.bytes;
  return total;
}

CudaBudget cuda_budget(
    int device_sm,
    int card_sm,
    sim::TorchVersion torch,
    std::string_view env_config,
    bool config_is_ours) {
  CudaBudget budget;
  const int target_sm = card_sm > 0 ? card_sm : device_sm;
  const int handles = sim::kTrainingCublasHandles;
  const sim::CublasWorkspace own = sim::cublas_workspace(device_sm, torch, "", handles);
  const sim::CublasWorkspace card = sim::cublas_workspace(target_sm, torch, "", handles);
  BudgetRule rule{"cublas_workspace", 0, ""};
  if (!env_config.empty() && !config_is_ours) {
    const sim::CublasWorkspace set = sim::cublas_workspace(target_sm, torch, env_config, handles);
    rule.bytes = set.bytes();
    rule.detail = set.describe();
  } else {
    rule.bytes = card.bytes();
    rule.detail = card.describe();
    if (card.bytes_per_handle != own.bytes_per_handle) {
      // Emulating a card on another: the device is told the card's size, and says by how much.
      const std::string config = sim::cublas_workspace_config_for(target_sm, torch);
      if (env_config.empty())
        budget.workspace_config_to_set = config;
      const int64_t less = own.bytes() - card.bytes();
      rule.detail += ", on this sm" + std::to_string(device_sm) +
                     " device through CUBLAS_WORKSPACE_CONFIG=" + config + ": " +
                     std::to_string(less < 0 ? -less : less) + " B " +
                     (less >= 0 ? "less" : "more") + " than its own default";
    }
  }
  budget.rules.push_back(rule);
  return budget;
}

std::string budgets_document(
    const std::vector<std::pair<std::string, int64_t>>& phases, sim::TorchVersion torch) {
  memory::BudgetFile file;
  for (const auto& [phase, cpu] : phases) {
    auto& devices = file.budgets["oomguard.run"][phase];
    devices["cpu"] = cpu;
    for (const auto& card : memory::card_profiles()) {
      const CudaBudget b = cuda_budget(card.compute_capability, 0, torch, "", false);
      devices["cuda:" + card.name] = memory::accepted_budget(cpu + b.extra_bytes(), 0.0);
    }
  }
  return memory::budgets_text(file);
}

}  // namespace oomguard::run
