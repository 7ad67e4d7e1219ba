#include "harness/app/run_device.h"

#include <cstdlib>
#include <stdexcept>

#include "harness/log.h"
#include "harness/memory/built_torch.h"
#include "harness/usage_error.h"
#include <oomguard/memory/cards.h>
#include <oomguard/memory/cuda_meter.h>
#include <oomguard/memory/meter_stack.h>
#include <oomguard/memory/sizes.h>

namespace oomguard::app {
namespace {

constexpr const char* kWorkspaceFromCard = "OOMGUARD_CUBLAS_WORKSPACE_CONFIG_FROM_CARD";

}  // namespace

void resolve_device(
    const memory::DeviceAsked& asked,
    const std::string& where,
    memory::DeviceKind& device,
    memory::EnvSettings& narrowing) {
  try {
    device = memory::device_kind_from_string(memory::resolve_device(asked.kind));
    narrowing = memory::cuda_device_settings(asked.index);
  } catch (const std::invalid_argument& e) {
    throw UsageError((where == "--device" ? "--" : where + ": ") + std::string(e.what()));
  }
}

void narrow_to_device(char** argv, const memory::EnvSettings& narrowing) {
  if (narrowing.empty())
    return;
  log::info("device: starting again with CUDA_VISIBLE_DEVICES=" + narrowing.front().second);
  memory::start_again(argv, narrowing);
}

std::vector<run::BudgetRule> cuda_budget_rules(const std::string& card, char** argv) {
  const int device_sm = memory::cuda_compute_capability(0);
  const int card_sm = card.empty() ? 0 : memory::find_card(card).compute_capability;
  const char* env = std::getenv("CUBLAS_WORKSPACE_CONFIG");
  const char* ours = std::getenv(kWorkspaceFromCard);
  const bool is_ours = env != nullptr && ours != nullptr && std::string(env) == ours;
  run::CudaBudget budget;
  try {
    budget = run::cuda_budget(
        device_sm, card_sm, memory::built_torch_version(), env != nullptr ? env : "", is_ours);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  if (!budget.workspace_config_to_set.empty()) {
    log::info(
        "--card " + card + ": starting again with CUBLAS_WORKSPACE_CONFIG=" +
        budget.workspace_config_to_set + " (the card's cuBLAS workspace, not this device's)");
    memory::start_again(
        argv,
        {{"CUBLAS_WORKSPACE_CONFIG", budget.workspace_config_to_set},
         {kWorkspaceFromCard, budget.workspace_config_to_set}});
  }
  for (const auto& rule : budget.rules)
    log::info(
        "budgets: + " + rule.name + " " + memory::format_size(rule.bytes) + ": " + rule.detail);
  return budget.rules;
}

}  // namespace oomguard::app
