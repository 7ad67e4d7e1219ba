#include "harness/plot/compare_plot.h"

#include <algorithm>

#include "harness/plot/memory_plot.h"
#include "harness/plot/svg_text.h"
#include <oomguard/memory/sizes.h>

namespace oomguard::plot {
namespace {

constexpr double kCompareLeft = 330, kCompareRight = kComparePlotWidth - 200, kCompareHeader = 80,
                 kCompareRow = 44;
constexpr double kCompareBar = 15;  // one bar's height; base and head stacked in a row

std::string bar(
    const char* cls,
    double x0,
    double x1,
    double y,
    const std::string& colour,
    int64_t bytes,
    const std::string& tip) {
  return "<rect class=\"" + std::string(cls) + "\" data-bytes=\"" + std::to_string(bytes) +
         "\" x=\"" + num(x0) + "\" y=\"" + num(y) + "\" width=\"" + num(std::max(x1 - x0, 1.0)) +
         "\" height=\"" + num(kCompareBar) + "\" fill=\"" + colour + "\"><title>" +
         xml_escape(tip) + "</title></rect>\n";
}

}  // namespace

std::string render_compare_svg(const ComparePlot& plot) {
  const double rows = static_cast<double>(plot.rows.size());
  const int height = static_cast<int>(kCompareHeader + kCompareRow * rows + 50);
  int64_t data_max = 1;
  for (const auto& r : plot.rows)
    data_max = std::max({data_max, r.base, r.head});
  const int64_t step = tick_step(data_max);
  const int64_t x_max = (data_max + step - 1) / step * step;
  const auto x_of = [&](int64_t bytes) {
    return kCompareLeft +
           (kCompareRight - kCompareLeft) * static_cast<double>(bytes) / static_cast<double>(x_max);
  };
  std::string svg = svg_header(kComparePlotWidth, height, 20, plot.title, plot.subtitle);
  const double bottom = kCompareHeader + kCompareRow * rows;
  for (int64_t v = 0; v <= x_max; v += step) {
    svg += "<line x1=\"" + num(x_of(v)) + "\" x2=\"" + num(x_of(v)) + "\" y1=\"" +
           num(kCompareHeader) + "\" y2=\"" + num(bottom) + "\" stroke=\"#e5e5e5\"/>\n";
    svg += "<text class=\"tick\" data-bytes=\"" + std::to_string(v) + "\" x=\"" + num(x_of(v)) +
           "\" y=\"" + num(bottom + 16) + "\" text-anchor=\"middle\">" + memory::format_size(v) +
           "</text>\n";
  }
  for (size_t i = 0; i < plot.rows.size(); ++i) {
    const auto& r = plot.rows[i];
    const double top = kCompareHeader + kCompareRow * static_cast<double>(i) + 6;
    svg += "<text x=\"" + num(kCompareLeft - 10) + "\" y=\"" + num(top + kCompareBar + 4) +
           "\" text-anchor=\"end\">" + xml_escape(r.label) + "</text>\n";
    if (r.base >= 0)
      svg +=
          bar("base",
              kCompareLeft,
              x_of(r.base),
              top,
              "#b0b0b0",
              r.base,
              "base: " + memory::format_size(r.base));
    if (r.head >= 0)
      svg +=
          bar(r.over_limit ? "head over" : "head",
              kCompareLeft,
              x_of(r.head),
              top + kCompareBar + 2,
              r.over_limit ? "#d62728" : "#1f77b4",
              r.head,
              "head: " + memory::format_size(r.head));
    svg += "<text x=\"" + num(kCompareRight + 10) + "\" y=\"" + num(top + kCompareBar + 4) +
           "\" fill=\"" + (r.over_limit ? "#d62728" : "#333333") + "\">" + xml_escape(r.change) +
           "</text>\n";
  }
  svg += "<text x=\"" + num((kCompareLeft + kCompareRight) / 2) + "\" y=\"" + num(bottom + 38) +
         "\" text-anchor=\"middle\" fill=\"#555555\">peak allocated: base (grey), head (blue; "
         "red over its limit)</text>\n";
  svg += "</svg>\n";
  return svg;
}

}  // namespace oomguard::plot
