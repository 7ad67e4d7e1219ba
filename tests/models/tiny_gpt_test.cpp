// models/: TinyGPT shapes and the KV-cache decode path.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include <ATen/ops/allclose.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <oomguard/memory/tracking_allocator.h>
#include <oomguard/meta/meta_device.h>
#include "models/tiny_gpt.h"
#include "tests/support/fixtures.h"

namespace oomguard::models {
namespace {

using TinyGPTTest = testing::SeedingFixture;

TEST_F(TinyGPTTest, ForwardGivesLogitsOverTheVocabulary) {
  TinyGPT model(testing::small_model_config());
  const auto ids = at::randint(0, 258, {2, 10}, at::kLong);
  EXPECT_EQ(model->forward(ids).sizes(), (c10::IntArrayRef{2, 10, 258}));
}

TEST_F(TinyGPTTest, CachedDecodeEqualsFullForward) {
  TinyGPT model(testing::small_model_config());
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

// The kv_cap guard's structural check: a static cache keeps one buffer for its whole life; the
// grow cache (the guard off) reallocates every step. Both decode the same logits.
TEST_F(TinyGPTTest, StaticCacheNeverReallocatesWhileGrowCacheDoes) {
  TinyGPT model(testing::small_model_config());
  model->eval();
  torch::NoGradGuard no_grad;
  const auto ids = at::randint(0, 258, {2, 12}, at::kLong);
  KVCache fixed = model->make_cache(2, 12, CacheMode::kStatic);
  KVCache grow = model->make_cache(2, 12, CacheMode::kGrow);
  const int64_t full_bytes = fixed.nbytes();
  auto a = model->forward(ids.narrow(1, 0, 4), fixed);
  auto b = model->forward(ids.narrow(1, 0, 4), grow);
  const void* fixed_storage = fixed.storage_of_layer0();
  for (int64_t t = 4; t < 12; ++t) {
    const void* grow_storage = grow.storage_of_layer0();
    a = model->forward(ids.narrow(1, t, 1), fixed);
    b = model->forward(ids.narrow(1, t, 1), grow);
    EXPECT_EQ(fixed.storage_of_layer0(), fixed_storage) << "static cache moved at step " << t;
    EXPECT_NE(grow.storage_of_layer0(), grow_storage) << "grow cache kept its buffer at " << t;
    EXPECT_TRUE(at::allclose(a, b, /*rtol=*/1e-5, /*atol=*/1e-6));
  }
  EXPECT_EQ(fixed.nbytes(), full_bytes);
  EXPECT_EQ(grow.nbytes(), full_bytes);  // full at the end: 12 of 12 positions
  EXPECT_THROW(model->forward(ids.narrow(1, 0, 1), grow), c10::Error);
}

TEST_F(TinyGPTTest, CacheRefusesToGrowPastCapacity) {
  TinyGPT model(testing::small_model_config());
  model->eval();
  torch::NoGradGuard no_grad;
  KVCache cache = model->make_cache(1, 4);
  model->forward(at::randint(0, 258, {1, 4}, at::kLong), cache);
  EXPECT_THROW(model->forward(at::randint(0, 258, {1, 1}, at::kLong), cache), c10::Error);
}

// What one block keeps for backward is what block_saved_bytes_per_token counts from the
// shapes, on both attention paths (math with attention dropout, flash without).
TEST_F(TinyGPTTest, BlockKeepsThePredictedBytesForBackward) {
  auto& meter = memory::TrackingAllocator::instance();
  for (const auto& [dropout, attention_dropout] :
       {std::pair{0.1, 0.0}, std::pair{0.1, 0.1}, std::pair{0.0, 0.0}}) {
    TinyGPTConfig c = testing::small_model_config();
    c.dropout = dropout;
    c.attention_dropout = attention_dropout;
    Block block(c, 0);
    block->train();
    constexpr int64_t B = 2, T = 24;
    const auto x = at::randn({B, T, c.d_model}).requires_grad_(true);
    const int64_t before = meter.stats().allocated_bytes;
    const auto y = block->forward(x);
    const auto kept = meter.stats().allocated_bytes - before - static_cast<int64_t>(y.nbytes());
    // The block's input is counted too (norm1 keeps it), but x was allocated before.
    EXPECT_EQ(kept + static_cast<int64_t>(x.nbytes()), block_saved_bytes_per_token(c, T) * B * T)
        << "dropout " << dropout << ", attention dropout " << attention_dropout;
  }
}

TEST_F(TinyGPTTest, HeadIsTiedToTheEmbedding) {
  TinyGPT model(testing::small_model_config());
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

// Made within a MakeOnMeta, TinyGPT exists without the CPU: its parameters are Meta tensors,
// counted by the Meta allocator, and nothing of their size is allocated on the CPU.
TEST_F(TinyGPTTest, OnTheMetaDeviceItIsShapesAlone) {
  meta::use_meta_device();
  memory::TrackingAllocator& cpu = memory::TrackingAllocator::instance();
  memory::TrackingAllocator& meta = memory::TrackingAllocator::meta();
  const int64_t cpu_before = cpu.total_allocated_bytes();
  const int64_t meta_before = meta.stats().allocated_bytes;
  TinyGPTConfig big = testing::small_model_config();
  big.d_model = 1024;
  big.heads = 16;
  TinyGPT model = [&] {
    const meta::MakeOnMeta on_meta;
    return TinyGPT(big);
  }();
  int64_t bytes = 0;
  for (const auto& p : model->parameters()) {
    EXPECT_TRUE(p.is_meta());
    bytes += p.numel() * 4;
  }
  EXPECT_EQ(meta.stats().allocated_bytes - meta_before, bytes);
  EXPECT_LT(cpu.total_allocated_bytes() - cpu_before, bytes / 100) << "built on the CPU";
  const auto logits =
      model->forward(at::zeros({2, 10}, at::TensorOptions().device(c10::kMeta).dtype(at::kLong)));
  EXPECT_EQ(logits.sizes(), (c10::IntArrayRef{2, 10, 258}));
  EXPECT_TRUE(logits.is_meta());
}

}  // namespace
}  // namespace oomguard::models
