// oomguard_bench: Google Benchmark over the tracking allocator, with the thread count set
// from the machine (LibTorch may start with one).
//
// The memory manager is registered only for single-repetition runs: Google Benchmark 1.7.1
// keeps each repetition's memory result through a pointer into a vector it keeps growing, so
// with repetitions those pointers dangle (garbage figures; with random interleaving, a
// crash). ci/run-bench.sh therefore takes times and peak bytes from two runs.
//
// --oomguard_memory=false registers none: Google Benchmark then runs each benchmark once, not
// a second time for its memory. The suite's one-iteration smoke tests pass it (but one,
// which keeps the memory manager from rotting).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>

#include <ATen/Parallel.h>

#include "tests/bench/tracked_memory.h"

int main(int argc, char** argv) {
  at::set_num_threads(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  bool repeated = false, no_memory = false;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    repeated |= arg.rfind("--benchmark_repetitions=", 0) == 0 &&
                std::stoi(arg.substr(std::strlen("--benchmark_repetitions="))) > 1;
    repeated |= arg == "--benchmark_enable_random_interleaving=true";
    if (arg == "--oomguard_memory=false")
      no_memory = true;
    else
      argv[kept++] = argv[i];
  }
  argc = kept;
  oomguard::bench::TrackedMemory memory;
  if (!repeated && !no_memory)
    benchmark::RegisterMemoryManager(&memory);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv))
    return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
