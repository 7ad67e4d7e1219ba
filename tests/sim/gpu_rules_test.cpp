// The CPU-to-GPU rules: cuBLAS workspaces per handle, architecture, LibTorch version and
// CUBLAS_WORKSPACE_CONFIG, as aten/src/ATen/cuda/CublasHandlePool.cpp sizes them.
#include <gtest/gtest.h>

#include <stdexcept>

#include <oomguard/sim/gpu_rules.h>

namespace oomguard::sim {
namespace {

constexpr TorchVersion kTorch210{2, 10};
constexpr TorchVersion kTorch215{2, 15};

TEST(CublasWorkspace, SumsTheConfigAsLibTorchDoesAndRefusesWhatItCannotParse) {
  EXPECT_EQ(parse_cublas_workspace_config(":4096:2:16:8"), 8519680);  // the pre-Hopper default
  EXPECT_EQ(parse_cublas_workspace_config(":4096:8"), 32 << 20);      // Hopper's
  EXPECT_EQ(parse_cublas_workspace_config(":16:8"), 16 * 1024 * 8);
  for (const char* bad :
       {"", "4096:8", ":4096", ":4096:", ":a:1", ":4096:8:", ":4096;8", ":1000000000:1000000000"})
    EXPECT_THROW(parse_cublas_workspace_config(bad), std::invalid_argument) << bad;
  try {
    parse_cublas_workspace_config(":4096");
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("CUBLAS_WORKSPACE_CONFIG=:4096"), std::string::npos);
  }
}

TEST(CublasWorkspace, DefaultsPerArchitectureAndVersion) {
  EXPECT_EQ(cublas_workspace(75, kTorch215, "", 1).bytes(), 8519680);  // T4
  EXPECT_EQ(cublas_workspace(80, kTorch215, "", 1).bytes(), 8519680);  // A100
  EXPECT_EQ(cublas_workspace(86, kTorch215, "", 1).bytes(), 8519680);
  EXPECT_EQ(cublas_workspace(90, kTorch215, "", 1).bytes(), 32 << 20);  // H100, H200
  EXPECT_EQ(cublas_workspace(90, kTorch210, "", 1).bytes(), 32 << 20);
  // Blackwell: the pre-Hopper size up to 2.10, Hopper's from 2.15.
  EXPECT_EQ(cublas_workspace(100, kTorch210, "", 1).bytes(), 8519680);
  EXPECT_EQ(cublas_workspace(100, kTorch215, "", 1).bytes(), 32 << 20);
}

TEST(CublasWorkspace, ATrainingStepHasTwoHandlesAndTheConfigWins) {
  const CublasWorkspace t4 = cublas_workspace(75, kTorch215, "", kTrainingCublasHandles);
  EXPECT_EQ(t4.bytes(), 2 * 8519680);
  EXPECT_EQ(t4.describe(), "2 handles x 8,519,680 B (default for sm75)");
  const CublasWorkspace set = cublas_workspace(90, kTorch215, ":4096:2:16:8", 2);
  EXPECT_EQ(set.bytes(), 2 * 8519680);
  EXPECT_EQ(set.describe(), "2 handles x 8,519,680 B (CUBLAS_WORKSPACE_CONFIG=:4096:2:16:8)");
}

TEST(CublasWorkspace, AConfigGivesAnotherCardTheEmulatedOnesDefault) {
  for (const int sm : {75, 80, 90, 100}) {
    const std::string config = cublas_workspace_config_for(sm, kTorch215);
    EXPECT_EQ(
        cublas_workspace(90, kTorch215, config, 1).bytes(),
        cublas_workspace(sm, kTorch215, "", 1).bytes())
        << "sm" << sm;
  }
}

}  // namespace
}  // namespace oomguard::sim
