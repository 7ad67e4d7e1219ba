#pragma once
// Memory over a run as a picture: one self-contained SVG (no script, no network), or the same
// SVG in an HTML page. Allocated bytes (and reserved, where modelled or measured) against the
// event count, phases shaded and named, each phase's budget as a dashed line, the card's
// capacity, and the peak marked with what was live at it. Long runs are drawn as an envelope,
// one column per pixel holding the column's highest value, so every peak stays exact.
#include <cstdint>
#include <string>
#include <vector>

#include <oomguard/memory/tag_bytes.h>

namespace oomguard::plot {

using TagBytes = memory::TagBytes;

struct PhaseSpan {
  std::string name;
  size_t first = 0;           // its first event
  int64_t budget_bytes = -1;  // -1: none known
  size_t peak_index = 0;      // the event after which its allocated bytes peaked
  int64_t peak_bytes = 0;
  std::vector<TagBytes> live_at_peak;
};

struct MemoryPlot {
  std::string title, subtitle;
  std::vector<int64_t> allocated;  // after each event
  std::vector<int64_t> reserved;   // empty when neither modelled nor measured
  std::string reserved_label;      // e.g. "reserved (caching-allocator model, t4)"
  std::vector<PhaseSpan> phases;   // in order; first of the first is 0
  int64_t capacity_bytes = 0;      // 0: no card
  std::string capacity_label;
  // An allocation that ran out of memory: marked at its event, with this label ("" for none).
  size_t oom_index = 0;
  std::string oom_label;
};

// Canvas size of render_svg, in pixels.
constexpr int kPlotWidth = 1200;
constexpr int kPlotHeight = 560;

// The picture as an SVG document.
std::string render_svg(const MemoryPlot& plot);

// `svg` in a minimal HTML page titled `title`.
std::string wrap_html(const std::string& svg, const std::string& title);

}  // namespace oomguard::plot
