// BM_Plot: what `oomguard plot` does with a trace of 1,000,000 events (four phases, random
// sizes from 512 B to 4 MiB, at most 400 live), through the application's own path
// (app::make_picture): read the JSON Lines, replay them through the caching-allocator model
// with the timeline kept, and draw the SVG. The target: under 3 s
// and a file under 2 MB. Counters: events_per_second, svg_kib.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "harness/app/plot.h"
#include <oomguard/sim/replay.h>

namespace oomguard::bench {
namespace {

std::string million_event_trace() {
  static const char* const kTags[] = {"t0", "t1", "t2", "t3", "t4", "t5", "t6"};
  std::mt19937_64 rng(1);
  std::string text;
  std::vector<int64_t> live;
  int64_t next_id = 1;
  for (const char* phase : {"setup", "train", "evaluate", "generate"}) {
    std::string line = sim::phase_line(phase);
    for (int k = 0; k < 250000; ++k) {
      text.append(line).push_back('\n');
      if (!live.empty() && (rng() % 2 == 0 || live.size() > 400)) {
        const size_t i = rng() % live.size();
        line = sim::free_line(live[i]);
        live[i] = live.back();
        live.pop_back();
      } else {
        const auto bytes = static_cast<int64_t>(512 + rng() % (4 << 20));
        line = sim::alloc_line(next_id, bytes, phase, k / 1000, kTags[next_id % 7]);
        live.push_back(next_id++);
      }
    }
    text.append(line).push_back('\n');
  }
  return text;
}

void BM_Plot(benchmark::State& state) {
  // The real path of `oomguard plot TRACE -o FILE`: app::make_picture reads the file, replays
  // it with the timeline kept and draws the SVG (writing the file is left out).
  static const std::string path = [] {
    const std::string p =
        (std::filesystem::temp_directory_path() / "oomguard-bench-plot.jsonl").string();
    std::ofstream(p) << million_event_trace();
    return p;
  }();
  app::PlotRequest request;
  request.input = path;
  request.output = "bench.svg";
  size_t svg_bytes = 0;
  for (auto _ : state) {
    const app::Picture picture = app::make_picture(request);
    svg_bytes = picture.svg.size();
    benchmark::DoNotOptimize(svg_bytes);
  }
  const double events = 1'000'000;
  state.counters["events_per_second"] = benchmark::Counter(
      events * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["events"] = events;
  state.counters["svg_kib"] = static_cast<double>(svg_bytes) / 1024.0;
}
BENCHMARK(BM_Plot)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace oomguard::bench
