#pragma once
// The device a run takes, and what a CUDA device asks of the process before the run: to be
// narrowed to that one device, and the cuBLAS workspaces of the card it stands for added to the
// budgets. Either may start the process again. Used by harness/app/run.cpp; no Torch header.
#include <string>
#include <vector>

#include "harness/memory/start_again.h"
#include "harness/run/cuda_budget.h"
#include <oomguard/memory/device_kind.h>

namespace oomguard::app {

// The device the run takes: auto takes CUDA when this build has the CUDA meter and a device is
// visible; cuda:N is the N-th visible device, which execute_run makes the process's only one
// (`narrowing`, for narrow_to_device). `where` names where it was asked for (--device, or
// OOMGUARD_DEVICE as for the GoogleTest layer). Throws UsageError.
void resolve_device(
    const memory::DeviceAsked& asked,
    const std::string& where,
    memory::DeviceKind& device,
    memory::EnvSettings& narrowing);

// cuda:N with N > 0: the process starts again seeing that device alone (CUDA_VISIBLE_DEVICES,
// from its own list where it has one), so that it is device 0 to LibTorch and the meter.
void narrow_to_device(char** argv, const memory::EnvSettings& narrowing);

// The config's budgets are CPU figures; a CUDA run also holds the cuBLAS workspaces of the
// card it stands for (`card`, --card; run::cuda_budget). Emulating a card whose workspace size
// differs from the device's, the process starts again with CUBLAS_WORKSPACE_CONFIG set to the
// card's, so the device allocates what the card would (a user's own CUBLAS_WORKSPACE_CONFIG is
// kept).
std::vector<run::BudgetRule> cuda_budget_rules(const std::string& card, char** argv);

}  // namespace oomguard::app
