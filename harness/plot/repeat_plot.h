#pragma once
// A repeat-N summary as a picture: one panel per phase, each seed's peak as a dot against the
// phase's budget (dashed), so the seeds that fail stand out: a failed run's dots are red, and
// a phase that ran out of memory or did not run is marked at the bottom.
#include <cstdint>
#include <string>
#include <vector>

namespace oomguard::plot {

struct RepeatPlot {
  std::string title, subtitle;
  std::vector<std::string> phases;  // in run order
  std::vector<int64_t> budgets;     // per phase; -1 where none is known
  struct Seed {
    uint64_t seed = 0;
    std::string outcome;         // the run's: pass, budget_exceeded, oom, ...
    std::vector<int64_t> peaks;  // per phase; -1 where the phase has no figure
  };
  std::vector<Seed> seeds;
};

// Canvas width; the height is 110 + 190 per phase.
constexpr int kRepeatPlotWidth = 1200;

std::string render_repeat_svg(const RepeatPlot& plot);

}  // namespace oomguard::plot
