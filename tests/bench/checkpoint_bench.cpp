// One train step (forward, loss, backward, clip, AdamW, zero-grad) with and without gradient
// checkpointing, at 8 layers and T = 256 (the target shape). Memory: the step's peak
// above the model, gradients and optimizer state already allocated.
#include <benchmark/benchmark.h>

#include <ATen/Context.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/randint.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adamw.h>

#include "data/tokenizer.h"
#include "harness/phases/fused_adamw.h"
#include "models/tiny_gpt.h"

namespace oomguard::bench {
namespace {

void BM_TrainStepCheckpoint(benchmark::State& state) {
  constexpr int64_t B = 8, T = 256;
  models::TinyGPTConfig config;
  config.layers = 8;
  config.checkpoint_blocks = state.range(0) != 0;
  at::manual_seed(0);
  models::TinyGPT model(config);
  phases::FusedAdamW optimizer(model->parameters(), torch::optim::AdamWOptions(1e-3));
  const at::Tensor ids = at::randint(0, data::kVocabSize, {B, T}, at::kLong);
  const at::Tensor labels = at::randint(0, data::kVocabSize, {B * T}, at::kLong);
  for (auto _ : state) {
    const at::Tensor loss = at::cross_entropy_loss(model->forward(ids).flatten(0, 1), labels);
    optimizer.zero_grad(/*set_to_none=*/true);
    loss.backward();
    torch::nn::utils::clip_grad_norm_(model->parameters(), 1.0);
    optimizer.step();
    benchmark::DoNotOptimize(loss.item<double>());
  }
  state.SetLabel(config.checkpoint_blocks ? "checkpointed" : "plain");
  state.counters["tokens_per_second"] =
      benchmark::Counter(static_cast<double>(B * T), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_TrainStepCheckpoint)
    ->ArgName("checkpoint")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace oomguard::bench
