// Greedy decoding of 256 new tokens after a 32-token prompt at batch 1, with the static cache,
// the grow cache and no cache (the whole context recomputed every step). Memory: the phase's
// peak above the model.
#include <benchmark/benchmark.h>

#include <ATen/Context.h>

#include "data/corpus.h"
#include "harness/phases/phases.h"

namespace oomguard::bench {
namespace {

constexpr int64_t kNewTokens = 256;

void BM_DecodeCache(benchmark::State& state) {
  const auto mode = static_cast<models::CacheMode>(state.range(0));
  at::manual_seed(0);
  models::TinyGPT model(models::TinyGPTConfig{});
  data::CorpusConfig corpus;
  corpus.num_samples = 16;
  const auto samples = data::make_synthetic_corpus(corpus);
  phases::GenerateConfig config;
  config.prompts = 1;
  config.prompt_length = 32;
  config.max_new_tokens = kNewTokens;
  config.cache = mode;
  for (auto _ : state) {
    benchmark::DoNotOptimize(phases::generate(model, samples, config).tokens_generated);
  }
  state.SetLabel(
      mode == models::CacheMode::kStatic ? "static"
                                         : (mode == models::CacheMode::kGrow ? "grow" : "none"));
  state.counters["tokens_per_second"] = benchmark::Counter(
      static_cast<double>(kNewTokens), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_DecodeCache)
    ->ArgName("cache")
    ->Arg(static_cast<int64_t>(models::CacheMode::kStatic))
    ->Arg(static_cast<int64_t>(models::CacheMode::kGrow))
    ->Arg(static_cast<int64_t>(models::CacheMode::kNone))
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace oomguard::bench
