#pragma once
// The budgets of a CUDA run: the config's budgets are CPU figures, and a CUDA run of the same
// phases also holds what the CPU never allocates. Each addition is a named rule with its
// bytes, listed in the report (`budget_rules`). No Torch.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <oomguard/sim/alloc_conf.h>
#include <oomguard/sim/gpu_rules.h>

namespace oomguard::run {

// A rule's bytes are added to every phase's budget (held from the first GEMM on).
using BudgetRule = sim::RuleEffect;

struct CudaBudget {
  std::vector<BudgetRule> rules;
  // CUBLAS_WORKSPACE_CONFIG the run must start again with, so that the device allocates the
  // emulated card's workspaces instead of its own; "" when nothing needs setting.
  std::string workspace_config_to_set;

  int64_t extra_bytes() const;
};

// The rules for a CUDA run on a device of compute capability `device_sm` (75 for sm_75)
// standing for a card of `card_sm` (0: the device itself), under LibTorch `torch`, with
// CUBLAS_WORKSPACE_CONFIG `env_config` ("" unset). `config_is_ours`: that value was set by
// oomguard for the card (a run started again), not by the user.
CudaBudget cuda_budget(
    int device_sm,
    int card_sm,
    sim::TorchVersion torch,
    std::string_view env_config,
    bool config_is_ours);

// The default run's budgets as data (oomguard.budgets/1, test "oomguard.run"; the text
// memory::budgets_text writes), per device and card: `cpu` the config's figures,
// `cuda:<card>` those plus cuda_budget() of each known card on itself, rounded up to what
// format_size prints. `phases`: name -> CPU budget.
std::string budgets_document(
    const std::vector<std::pair<std::string, int64_t>>& phases, sim::TorchVersion torch);

}  // namespace oomguard::run
