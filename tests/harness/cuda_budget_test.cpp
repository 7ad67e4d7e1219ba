// The budgets of a CUDA run: the config's CPU figures plus the cuBLAS workspaces of the card
// the run stands for, the emulated card's size set on a device whose own differs.
#include <gtest/gtest.h>

#include <stdexcept>

#include "harness/run/cuda_budget.h"

namespace oomguard::run {
namespace {

constexpr sim::TorchVersion kTorch{2, 15};
constexpr int64_t kPreHopper = 8519680;  // per handle, sm75 and sm80
constexpr int64_t kHopper = 32 << 20;

TEST(CudaBudget, TheCardItselfGetsItsOwnWorkspacesAndNothingToSet) {
  const CudaBudget t4 = cuda_budget(75, 0, kTorch, "", false);
  ASSERT_EQ(t4.rules.size(), 1U);
  EXPECT_EQ(t4.rules[0].name, "cublas_workspace");
  EXPECT_EQ(t4.extra_bytes(), 2 * kPreHopper);
  EXPECT_EQ(t4.workspace_config_to_set, "");
  EXPECT_EQ(cuda_budget(90, 0, kTorch, "", false).extra_bytes(), 2 * kHopper);
  // An A100 emulated on an A100-sized default: the same workspace, nothing to set.
  EXPECT_EQ(cuda_budget(80, 75, kTorch, "", false).workspace_config_to_set, "");
}

TEST(CudaBudget, AT4EmulatedOnAHopperCardIsGivenTheT4sWorkspace) {
  const CudaBudget b = cuda_budget(90, 75, kTorch, "", false);
  EXPECT_EQ(b.workspace_config_to_set, ":4096:2:16:8");
  EXPECT_EQ(b.extra_bytes(), 2 * kPreHopper);
  // Started again with it, the value is oomguard's: the card's budget, the correction named.
  const CudaBudget again = cuda_budget(90, 75, kTorch, ":4096:2:16:8", true);
  EXPECT_EQ(again.workspace_config_to_set, "");
  EXPECT_EQ(again.extra_bytes(), 2 * kPreHopper);
  EXPECT_NE(again.rules[0].detail.find("50069504 B less than its own default"), std::string::npos)
      << again.rules[0].detail;
}

TEST(CudaBudget, AUsersOwnWorkspaceConfigIsKeptAndCounted) {
  const CudaBudget b = cuda_budget(90, 75, kTorch, ":4096:8", false);
  EXPECT_EQ(b.workspace_config_to_set, "");
  EXPECT_EQ(b.extra_bytes(), 2 * kHopper);
  EXPECT_NE(b.rules[0].detail.find("CUBLAS_WORKSPACE_CONFIG=:4096:8"), std::string::npos);
  EXPECT_THROW(cuda_budget(90, 75, kTorch, "4096", false), std::invalid_argument);
}

}  // namespace
}  // namespace oomguard::run
