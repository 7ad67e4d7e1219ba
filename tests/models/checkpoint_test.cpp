// models/checkpoint: recomputation gives the gradients of a plain backward, dropout included.
#include <gtest/gtest.h>

#include <ATen/Context.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include <oomguard/models/checkpoint.h>
#include "models/tiny_gpt.h"
#include "tests/support/fixtures.h"

namespace oomguard::models {
namespace {

using CheckpointTest = testing::SeedingFixture;

double relative_error(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).norm().item<double>() / std::max(b.norm().item<double>(), 1e-30);
}

// Any callable works: here two linear layers with dropout between them, not a TinyGPT block.
TEST_F(CheckpointTest, GivesThePlainGradientsOfAnyCallableWithDropout) {
  torch::nn::Linear fc(16, 64), out(64, 16);
  torch::nn::Dropout drop(0.3);
  const BlockFn mlp = [&](const at::Tensor& x) {
    return out->forward(drop->forward(at::gelu(fc->forward(x))));
  };
  const at::Tensor input = at::randn({4, 16});
  std::vector<at::Tensor> plain_grads, checkpointed_grads;
  for (const bool use_checkpoint : {false, true}) {
    fc->zero_grad();
    out->zero_grad();
    at::manual_seed(7);  // the same dropout masks in both runs, if checkpoint replays them
    const at::Tensor x = input.clone().requires_grad_(true);
    const at::Tensor y = use_checkpoint ? checkpoint(mlp, x) : mlp(x);
    EXPECT_EQ(y.grad_fn() != nullptr, true);
    (y * y).sum().backward();
    auto& grads = use_checkpoint ? checkpointed_grads : plain_grads;
    grads = {x.grad(), fc->weight.grad(), fc->bias.grad(), out->weight.grad(), out->bias.grad()};
  }
  for (size_t i = 0; i < plain_grads.size(); ++i) {
    ASSERT_TRUE(checkpointed_grads[i].defined()) << i;
    EXPECT_LT(relative_error(checkpointed_grads[i], plain_grads[i]), 1e-5) << "gradient " << i;
  }
}

TEST_F(CheckpointTest, LeavesTheGeneratorWhereAPlainRunWould) {
  torch::nn::Dropout drop(0.5);
  const BlockFn fn = [&](const at::Tensor& x) { return drop->forward(x) * 2.0; };
  at::Tensor after[2];
  for (const bool use_checkpoint : {false, true}) {
    at::manual_seed(3);
    const at::Tensor x = at::randn({64}).requires_grad_(true);
    const at::Tensor y = use_checkpoint ? checkpoint(fn, x) : fn(x);
    y.sum().backward();
    after[use_checkpoint ? 1 : 0] = at::randn({8});  // the next draw after backward
  }
  EXPECT_TRUE(after[0].equal(after[1]));
}

TinyGPTConfig config(bool checkpoint_blocks) {
  TinyGPTConfig c = testing::small_model_config();
  c.layers = 3;
  c.attention_dropout = 0.1;  // the random draws inside attention must replay too
  c.checkpoint_blocks = checkpoint_blocks;
  return c;
}

// Every parameter's gradient, checkpointed vs not: the same weights, the same dropout masks.
TEST_F(CheckpointTest, TinyGPTGradientsMatchForEveryParameter) {
  const at::Tensor ids = at::randint(0, 258, {3, 24}, at::kLong);
  const at::Tensor labels = at::randint(0, 258, {3 * 24}, at::kLong);
  std::vector<std::pair<std::string, at::Tensor>> grads[2];
  for (const bool use_checkpoint : {false, true}) {
    at::manual_seed(11);
    TinyGPT model(config(use_checkpoint));
    at::manual_seed(12);
    const at::Tensor loss = at::cross_entropy_loss(model->forward(ids).flatten(0, 1), labels);
    loss.backward();
    for (const auto& p : model->named_parameters())
      grads[use_checkpoint ? 1 : 0].emplace_back(p.key(), p.value().grad());
  }
  ASSERT_EQ(grads[0].size(), grads[1].size());
  for (size_t i = 0; i < grads[0].size(); ++i) {
    ASSERT_TRUE(grads[1][i].second.defined()) << grads[1][i].first;
    EXPECT_LT(relative_error(grads[1][i].second, grads[0][i].second), 1e-5) << grads[0][i].first;
  }
}

}  // namespace
}  // namespace oomguard::models
