// The phases at the bench configuration (d_model 384, 6 layers, 6 heads, T = 256, batch 8):
// a train step (untracked, tracked, and predicted for a T4), a guarded evaluation batch,
// per-token decoding and the collator. Ratios against machine_bench.cpp are in ci/bench_table.py.
#include <memory>
#include <vector>

#include <benchmark/benchmark.h>

#include <ATen/Context.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/randint.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adamw.h>
#include <torch/version.h>

#include "data/corpus.h"
#include "data/loader.h"
#include "data/tokenizer.h"
#include <oomguard/memory/live_by_tag.h>
#include <oomguard/memory/modelled_meter.h>
#include <oomguard/memory/tracking_allocator.h>
#include "harness/memory/operator_callbacks.h"
#include "harness/phases/fused_adamw.h"
#include "harness/phases/phases.h"

namespace oomguard::bench {
namespace {

constexpr int64_t kBatch = 8, kLength = 256;

models::TinyGPTConfig bench_model() {
  models::TinyGPTConfig c;
  c.d_model = 384;
  c.layers = 6;
  c.heads = 6;
  return c;
}

std::vector<std::string> bench_corpus() {
  data::CorpusConfig corpus;
  corpus.max_length = kLength;
  corpus.num_samples = 512;
  return data::make_synthetic_corpus(corpus);
}

// N of the FLOP formula: the parameters that take part in a matmul or an elementwise op per
// token; the position embedding is a lookup, so it is left out (the token embedding counts
// once, as the tied LM head).
int64_t flop_parameter_count(const models::TinyGPT& model) {
  int64_t n = 0;
  for (const auto& p : model->named_parameters())
    n += p.key() == "pos.weight" ? 0 : p.value().numel();
  return n;
}

// One step as phases::train takes it (no checkpointing), on one fixed batch. FLOPs per step:
// 6 N per token for the parameters (forward 2N, backward 4N) plus 12 L C T per token for the
// attention scores and their weighted sum (forward 4 L C T), with T x T counted in full: the
// causal half the kernel can skip is not subtracted.
// How a step is watched: not at all, by the CPU meter, or also by the caching-allocator model
// of a T4 with its cuBLAS workspace rule (the GoogleTest layer's prediction on CPU: a model
// fed every allocation and RecordFunction callbacks on every operator).
// kTagged: tracked, with what is live by tag kept (LiveByTag, as the GoogleTest layer and
// oomguard run on CPU do); kNamed: that, and untagged allocations named by their operator (a
// RecordFunction callback on every operator).
enum class Watch { kUntracked, kTracked, kPredicted, kTagged, kNamed };

void train_steps(benchmark::State& state, Watch watch) {
  auto& meter = memory::TrackingAllocator::instance();
  meter.set_counting(watch != Watch::kUntracked);
  std::unique_ptr<memory::ModelledMeter> predictor;
  std::unique_ptr<memory::LiveByTag> live;
  if (watch == Watch::kTagged || watch == Watch::kNamed) {
    live = std::make_unique<memory::LiveByTag>();
    meter.add_observer(live.get());
    memory::name_untagged_by_operator(watch == Watch::kNamed);
  }
  if (watch == Watch::kPredicted)
    predictor = std::make_unique<memory::ModelledMeter>(
        meter,
        std::vector<memory::ModelTarget>{
            memory::model_target("t4", 0, "", {TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR})});
  {
    at::manual_seed(0);
    models::TinyGPT model(bench_model());
    phases::FusedAdamW optimizer(model->parameters(), torch::optim::AdamWOptions(1e-3));
    const auto samples = bench_corpus();
    data::Loader loader(samples, kBatch, /*seed=*/0, {kLength});
    const data::Batch batch = loader.next();
    for (auto _ : state) {
      const at::Tensor logits = model->forward(batch.input_ids);
      const at::Tensor loss = at::cross_entropy_loss(
          logits.flatten(0, 1),
          batch.labels.flatten(),
          /*weight=*/{},
          at::Reduction::Mean,
          data::kIgnoreIndex);
      optimizer.zero_grad(/*set_to_none=*/true);
      loss.backward();
      torch::nn::utils::clip_grad_norm_(model->parameters(), 1.0);
      optimizer.step();
      benchmark::DoNotOptimize(loss.item<double>());
    }
    const auto c = bench_model();
    const double tokens = static_cast<double>(kBatch * kLength);
    const double flops = (6.0 * static_cast<double>(flop_parameter_count(model)) +
                          12.0 * static_cast<double>(c.layers * c.d_model * kLength)) *
                         tokens;
    state.counters["gflops"] =
        benchmark::Counter(flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
    state.counters["tokens_per_second"] =
        benchmark::Counter(tokens, benchmark::Counter::kIsIterationInvariantRate);
  }
  predictor.reset();
  if (live) {
    meter.remove_observer(live.get());
    memory::name_untagged_by_operator(false);
  }
  meter.set_counting(true);
}

void BM_TrainStep(benchmark::State& state) {
  train_steps(state, Watch::kTracked);
}
void BM_TrainStepUntracked(benchmark::State& state) {
  train_steps(state, Watch::kUntracked);
}
void BM_TrainStepPredicted(benchmark::State& state) {
  train_steps(state, Watch::kPredicted);
}
void BM_TrainStepTagged(benchmark::State& state) {
  train_steps(state, Watch::kTagged);
}
void BM_TrainStepNamed(benchmark::State& state) {
  train_steps(state, Watch::kNamed);
}
BENCHMARK(BM_TrainStep)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TrainStepTagged)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TrainStepNamed)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TrainStepUntracked)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TrainStepPredicted)->Unit(benchmark::kMillisecond);

// One guarded evaluation batch, its collation included.
void BM_Evaluate(benchmark::State& state) {
  at::manual_seed(0);
  models::TinyGPT model(bench_model());
  const auto samples = bench_corpus();
  data::Loader loader(samples, kBatch, /*seed=*/0, {kLength});
  phases::EvaluateConfig config;
  config.batches = 1;
  for (auto _ : state) {
    benchmark::DoNotOptimize(phases::evaluate(model, loader, config).loss);
  }
  state.counters["tokens_per_second"] = benchmark::Counter(
      static_cast<double>(kBatch * kLength), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Evaluate)->Unit(benchmark::kMillisecond);

// One greedy token at batch 1 with the static cache; every iteration reads every weight once.
void BM_Decode(benchmark::State& state) {
  constexpr int64_t kPrompt = 32, kCapacity = 512;
  at::manual_seed(0);
  models::TinyGPT model(bench_model());
  model->eval();
  torch::NoGradGuard no_grad;
  const at::Tensor prompt = at::randint(0, data::kVocabSize, {1, kPrompt}, at::kLong);
  std::optional<models::KVCache> cache;
  at::Tensor next;
  const auto restart = [&] {
    cache.emplace(model->make_cache(1, kCapacity));
    next = model->last_logits(prompt, &*cache).argmax(-1, /*keepdim=*/true);
  };
  restart();
  for (auto _ : state) {
    if (cache->length() == kCapacity) {
      state.PauseTiming();
      restart();
      state.ResumeTiming();
    }
    next = model->last_logits(next, &*cache).argmax(-1, /*keepdim=*/true);
    benchmark::DoNotOptimize(next.data_ptr());
  }
  int64_t weight_bytes = 0;
  for (const auto& p : model->parameters())
    weight_bytes += static_cast<int64_t>(p.nbytes());
  state.counters["weight_bytes"] = static_cast<double>(weight_bytes);
  state.counters["tokens_per_second"] =
      benchmark::Counter(1.0, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Decode)->Unit(benchmark::kMicrosecond);

// Tokenise and collate a batch of 8 at T = 256: positions per second.
void BM_Collate(benchmark::State& state) {
  const auto samples = bench_corpus();
  size_t next = 0;
  for (auto _ : state) {
    std::vector<const std::string*> batch;
    for (int64_t b = 0; b < kBatch; ++b)
      batch.push_back(&samples[next++ % samples.size()]);
    benchmark::DoNotOptimize(data::collate(batch, {kLength}).input_ids.data_ptr());
  }
  state.counters["tokens_per_second"] = benchmark::Counter(
      static_cast<double>(kBatch * kLength), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Collate)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace oomguard::bench
