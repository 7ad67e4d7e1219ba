// BM_Replay: the allocation trace of a default smoke run (train, evaluate, generate, every
// allocation and free of the CPU meter) replayed through the caching-allocator model of a
// T4; counter events_per_second. Arg: 0 default settings, 1 expandable_segments:True.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <oomguard/memory/cards.h>
#include <oomguard/memory/trace_recorder.h>
#include <oomguard/memory/tracking_allocator.h>
#include "harness/run/smoke_run.h"
#include <oomguard/sim/replay.h>

namespace oomguard::bench {
namespace {

// Recorded once per process, as `oomguard run --trace` records it.
const sim::Trace& smoke_trace() {
  static const sim::Trace trace = [] {
    const std::string path = "oomguard_bench_trace.jsonl";
    auto& tracker = memory::TrackingAllocator::instance();
    {
      memory::TraceRecorder recorder(path);
      tracker.add_observer(&recorder);
      run::RunOptions options;
      run::smoke_run(run::load_config(nlohmann::json::object()), tracker, options);
      tracker.remove_observer(&recorder);
      recorder.close();
    }
    std::ifstream in(path);
    sim::Trace t = sim::read_trace(in, path);
    std::remove(path.c_str());
    return t;
  }();
  return trace;
}

void BM_Replay(benchmark::State& state) {
  const sim::Trace& trace = smoke_trace();
  const memory::CardProfile& t4 = memory::find_card("t4");
  const sim::DeviceLimits device{t4.total_bytes, t4.capacity_bytes(), /*allowed_bytes=*/0};
  const auto settings =
      sim::AllocatorSettings::parse(state.range(0) == 1 ? "expandable_segments:True" : "");
  int64_t reserved = 0;
  for (auto _ : state) {
    const sim::ReplayResult r = sim::replay(trace, settings, device);
    reserved = r.peak_reserved_bytes;
    benchmark::DoNotOptimize(reserved);
  }
  state.counters["events_per_second"] = benchmark::Counter(
      static_cast<double>(trace.events.size()) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
  state.counters["events"] = static_cast<double>(trace.events.size());
  state.counters["peak_reserved_mib"] = static_cast<double>(reserved) / (1024.0 * 1024.0);
}
BENCHMARK(BM_Replay)->ArgName("expandable")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace oomguard::bench
