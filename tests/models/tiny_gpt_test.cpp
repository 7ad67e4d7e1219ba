// models/: TinyGPT shapes and the KV-cache decode path.
#include <gtest/gtest.h>

#include <ATen/ops/allclose.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/randint.h>
#include <torch/csrc/autograd/grad_mode.h>

#include "models/tiny_gpt.h"
#include "tests/support/fixtures.h"

namespace oomguard::models {
namespace {

using TinyGPTTest = testing::SeedingFixture;

TinyGPTConfig small() {
  TinyGPTConfig c;
  c.d_model = 32;
  c.layers = 2;
  c.heads = 4;
  c.max_seq_len = 64;
  c.dropout = 0.1;
  return c;
}

TEST_F(TinyGPTTest, ForwardGivesLogitsOverTheVocabulary) {
  TinyGPT model(small());
  const auto ids = at::randint(0, 258, {2, 10}, at::kLong);
  EXPECT_EQ(model->forward(ids).sizes(), (c10::IntArrayRef{2, 10, 258}));
}

TEST_F(TinyGPTTest, CachedDecodeEqualsFullForward) {
  TinyGPT model(small());
  model->eval();
  torch::NoGradGuard no_grad;
  const auto ids = at::randint(0, 258, {3, 20}, at::kLong);
  const auto full = model->forward(ids);  // [3, 20, V]
  KVCache cache = model->make_cache(3, 20);
  // Prefill 8, then a 4-token chunk (masked path), then one token at a time.
  std::vector<at::Tensor> parts = {
      model->forward(ids.narrow(1, 0, 8), cache), model->forward(ids.narrow(1, 8, 4), cache)};
  for (int64_t t = 12; t < 20; ++t)
    parts.push_back(model->forward(ids.narrow(1, t, 1), cache));
  const auto decoded = at::cat(parts, 1);
  EXPECT_TRUE(at::allclose(decoded, full, /*rtol=*/1e-4, /*atol=*/1e-5));
  EXPECT_EQ(cache.length(), 20);
}

TEST_F(TinyGPTTest, CacheRefusesToGrowPastCapacity) {
  TinyGPT model(small());
  model->eval();
  torch::NoGradGuard no_grad;
  KVCache cache = model->make_cache(1, 4);
  model->forward(at::randint(0, 258, {1, 4}, at::kLong), cache);
  EXPECT_THROW(model->forward(at::randint(0, 258, {1, 1}, at::kLong), cache), c10::Error);
}

TEST_F(TinyGPTTest, HeadIsTiedToTheEmbedding) {
  TinyGPT model(small());
  const auto params = model->named_parameters();
  for (const auto& p : params)
    EXPECT_EQ(p.key().find("head"), std::string::npos);
  // tok (258 x 32) + pos (64 x 32) + 2 blocks + final norm; no separate V x C head matrix.
  int64_t n = 0;
  for (const auto& p : model->parameters())
    n += p.numel();
  const int64_t C = 32, block = 2 * 2 * C + (3 * C * C + 3 * C) + (C * C + C) +
                                (4 * C * C + 4 * C) + (4 * C * C + C);
  EXPECT_EQ(n, 258 * C + 64 * C + 2 * block + 2 * C);
}

}  // namespace
}  // namespace oomguard::models
