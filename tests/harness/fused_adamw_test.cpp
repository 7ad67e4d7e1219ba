// harness/phases/fused_adamw.cpp: the fused step makes the same updates as LibTorch's AdamW.
#include <gtest/gtest.h>

#include <ATen/ops/allclose.h>
#include <ATen/ops/randn.h>
#include <torch/optim/adamw.h>

#include "harness/phases/fused_adamw.h"
#include "tests/support/fixtures.h"

namespace oomguard::phases {
namespace {

using FusedAdamWTest = testing::SeedingFixture;

// Two copies of the same parameters, one stepped by each optimizer with the same gradients.
TEST_F(FusedAdamWTest, MatchesLibTorchsAdamWStepForStep) {
  const auto options = torch::optim::AdamWOptions(1e-2).weight_decay(0.1).betas({0.8, 0.95});
  std::vector<torch::Tensor> ours, reference;
  for (const auto& shape : std::vector<std::vector<int64_t>>{{7, 5}, {5}, {3, 2, 4}}) {
    const at::Tensor init = at::randn(shape);
    ours.push_back(init.clone().requires_grad_(true));
    reference.push_back(init.clone().requires_grad_(true));
  }
  // The last parameter gets no gradient: both leave it alone.
  FusedAdamW fused(ours, options);
  torch::optim::AdamW plain(reference, options);
  for (int step = 0; step < 6; ++step) {
    for (size_t i = 0; i + 1 < ours.size(); ++i) {
      const at::Tensor g = at::randn(ours[i].sizes());
      ours[i].mutable_grad() = g.clone();
      reference[i].mutable_grad() = g.clone();
    }
    fused.step();
    plain.step();
    for (size_t i = 0; i < ours.size(); ++i)
      EXPECT_TRUE(at::allclose(ours[i], reference[i], /*rtol=*/1e-5, /*atol=*/1e-6))
          << "parameter " << i << " after step " << step;
  }
}

TEST_F(FusedAdamWTest, RefusesAmsgrad) {
  std::vector<torch::Tensor> p{at::randn({2}).requires_grad_(true)};
  EXPECT_THROW(FusedAdamW(p, torch::optim::AdamWOptions().amsgrad(true)), c10::Error);
}

}  // namespace
}  // namespace oomguard::phases
