#pragma once
// Base vs head as a picture: one row per test and phase, the base's peak allocated bytes as a
// grey bar and the head's below it (blue, red where it grew over its limit), the change
// written at the end of the row. The largest changes come first.
#include <cstdint>
#include <string>
#include <vector>

namespace oomguard::plot {

struct ComparePlot {
  std::string title, subtitle;
  struct Row {
    std::string label;             // "Suite.Name evaluate"
    int64_t base = -1, head = -1;  // -1: the phase is not on that side
    bool over_limit = false;
    std::string change;  // "+64MiB (+366.5%)", "only in head"
  };
  std::vector<Row> rows;
};

// Canvas width; the height is 110 + 44 per row.
constexpr int kComparePlotWidth = 1200;

std::string render_compare_svg(const ComparePlot& plot);

}  // namespace oomguard::plot
