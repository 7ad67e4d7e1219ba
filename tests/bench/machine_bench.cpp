// The machine's own limits, measured in the same run as the phases: fp32 GEMM throughput and
// memory bandwidth.
#include <benchmark/benchmark.h>

#include <ATen/ops/empty.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/randn.h>

namespace oomguard::bench {
namespace {

// C[M, N] = A[M, K] @ B[K, N]: 2 M N K floating-point operations.
void BM_GemmCeiling(benchmark::State& state) {
  const int64_t M = state.range(0), K = state.range(1), N = state.range(2);
  const at::Tensor a = at::randn({M, K}), b = at::randn({K, N});
  at::Tensor c = at::empty({M, N});
  for (auto _ : state) {
    at::mm_out(c, a, b);
    benchmark::DoNotOptimize(c.data_ptr());
  }
  state.counters["gflops"] = benchmark::Counter(
      2.0 * static_cast<double>(M * N * K) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}
// 1024^3, then the bench model's layers at B*T = 2048 tokens, d_model 384: qkv, proj, fc, out.
BENCHMARK(BM_GemmCeiling)
    ->ArgNames({"M", "K", "N"})
    ->Args({1024, 1024, 1024})
    ->Args({2048, 384, 1152})
    ->Args({2048, 384, 384})
    ->Args({2048, 384, 1536})
    ->Args({2048, 1536, 384})
    ->Unit(benchmark::kMillisecond);

// A 256 MiB copy: bytes_per_second counts what is read plus what is written.
void BM_MemoryBandwidth(benchmark::State& state) {
  constexpr int64_t kFloats = int64_t{64} << 20;
  const at::Tensor src = at::randn({kFloats});
  at::Tensor dst = at::empty({kFloats});
  for (auto _ : state) {
    dst.copy_(src);
    benchmark::DoNotOptimize(dst.data_ptr());
  }
  state.counters["bytes_per_second"] = benchmark::Counter(
      2.0 * 4.0 * static_cast<double>(kFloats), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_MemoryBandwidth)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace oomguard::bench
