#include "harness/plot/repeat_plot.h"

#include <algorithm>

#include "harness/plot/memory_plot.h"
#include "harness/plot/svg_text.h"
#include <oomguard/memory/sizes.h>

namespace oomguard::plot {
namespace {

constexpr double kRepeatLeft = 90, kRepeatRight = kRepeatPlotWidth - 30, kRepeatHeader = 70,
                 kRepeatPanel = 190;
constexpr double kRepeatPanelTop = 28, kRepeatPanelBottom = 160;  // within a panel: its plot area

}  // namespace

std::string render_repeat_svg(const RepeatPlot& plot) {
  const int height =
      static_cast<int>(kRepeatHeader + kRepeatPanel * static_cast<double>(plot.phases.size()) + 40);
  const size_t n = plot.seeds.size();
  const auto x_of = [&](size_t i) {
    return kRepeatLeft + (kRepeatRight - kRepeatLeft) * (static_cast<double>(i) + 0.5) /
                             static_cast<double>(std::max<size_t>(n, 1));
  };
  std::string svg = svg_header(kRepeatPlotWidth, height, kRepeatLeft, plot.title, plot.subtitle);
  for (size_t p = 0; p < plot.phases.size(); ++p) {
    const double top = kRepeatHeader + kRepeatPanel * static_cast<double>(p) + kRepeatPanelTop;
    const double bottom =
        kRepeatHeader + kRepeatPanel * static_cast<double>(p) + kRepeatPanelBottom;
    int64_t data_max = std::max<int64_t>(plot.budgets[p], 1);
    for (const auto& s : plot.seeds)
      data_max = std::max(data_max, s.peaks[p]);
    const int64_t step = tick_step(data_max + data_max / 20);
    const int64_t y_max = (data_max + data_max / 20 + step - 1) / step * step;
    const auto y_of = [&](int64_t bytes) {
      return bottom - (bottom - top) * static_cast<double>(bytes) / static_cast<double>(y_max);
    };
    svg += "<text x=\"" + num(kRepeatLeft) + "\" y=\"" + num(top - 8) + "\" font-weight=\"bold\">" +
           xml_escape(plot.phases[p]) + "</text>\n";
    for (int64_t v = 0; v <= y_max; v += step) {
      svg += "<line x1=\"" + num(kRepeatLeft) + "\" x2=\"" + num(kRepeatRight) + "\" y1=\"" +
             num(y_of(v)) + "\" y2=\"" + num(y_of(v)) + "\" stroke=\"#e5e5e5\"/>\n";
      svg += "<text class=\"tick\" data-phase=\"" + xml_escape(plot.phases[p]) +
             "\" data-bytes=\"" + std::to_string(v) + "\" x=\"" + num(kRepeatLeft - 8) + "\" y=\"" +
             num(y_of(v) + 4) + "\" text-anchor=\"end\">" + memory::format_size(v) + "</text>\n";
    }
    if (plot.budgets[p] >= 0) {
      const double y = y_of(plot.budgets[p]);
      svg += "<line class=\"budget\" data-phase=\"" + xml_escape(plot.phases[p]) +
             "\" data-bytes=\"" + std::to_string(plot.budgets[p]) + "\" x1=\"" + num(kRepeatLeft) +
             "\" x2=\"" + num(kRepeatRight) + "\" y1=\"" + num(y) + "\" y2=\"" + num(y) +
             "\" stroke=\"#d62728\" stroke-width=\"2\" stroke-dasharray=\"8 4\"/>\n";
      svg += "<text x=\"" + num(kRepeatRight - 4) + "\" y=\"" + num(y - 5) +
             "\" text-anchor=\"end\" fill=\"#d62728\">budget " +
             memory::format_size(plot.budgets[p]) + "</text>\n";
    }
    for (size_t i = 0; i < n; ++i) {
      const auto& s = plot.seeds[i];
      const bool failed = s.outcome != "pass";
      const std::string tip = "seed " + std::to_string(s.seed) + ": " + s.outcome;
      if (s.peaks[p] < 0) {  // no figure: the run ended before or in this phase
        svg += "<text class=\"missing\" x=\"" + num(x_of(i)) + "\" y=\"" + num(bottom - 4) +
               "\" text-anchor=\"middle\" fill=\"#d62728\" font-weight=\"bold\">x<title>" +
               xml_escape(tip) + "</title></text>\n";
        continue;
      }
      svg += "<circle class=\"seed\" data-seed=\"" + std::to_string(s.seed) + "\" data-bytes=\"" +
             std::to_string(s.peaks[p]) + "\" cx=\"" + num(x_of(i)) + "\" cy=\"" +
             num(y_of(s.peaks[p])) + "\" r=\"4\" fill=\"" + (failed ? "#d62728" : "#1f77b4") +
             "\"><title>" + xml_escape(tip + ", peak " + memory::format_size(s.peaks[p])) +
             "</title></circle>\n";
    }
    svg += "<line x1=\"" + num(kRepeatLeft) + "\" x2=\"" + num(kRepeatRight) + "\" y1=\"" +
           num(bottom) + "\" y2=\"" + num(bottom) + "\" stroke=\"#888888\"/>\n";
  }
  // Seeds along the bottom, as many as fit.
  const double base = kRepeatHeader + kRepeatPanel * static_cast<double>(plot.phases.size()) + 4;
  const size_t every = std::max<size_t>(1, n / 40);
  for (size_t i = 0; i < n; i += every)
    svg += "<text x=\"" + num(x_of(i)) + "\" y=\"" + num(base) +
           "\" text-anchor=\"middle\" fill=\"#555555\">" + std::to_string(plot.seeds[i].seed) +
           "</text>\n";
  svg += "<text x=\"" + num((kRepeatLeft + kRepeatRight) / 2) + "\" y=\"" + num(base + 20) +
         "\" text-anchor=\"middle\" fill=\"#555555\">seed (red: the run failed; x: no figure, "
         "the run ended before the phase finished)</text>\n";
  svg += "</svg>\n";
  return svg;
}

}  // namespace oomguard::plot
