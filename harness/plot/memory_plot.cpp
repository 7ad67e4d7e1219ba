#include "harness/plot/memory_plot.h"

#include "harness/plot/svg_text.h"
#include <oomguard/memory/sizes.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>

namespace oomguard::plot {
namespace {

// Plot area inside the canvas (pixels): y grows downwards.
constexpr double kLeft = 90, kRight = kPlotWidth - 30, kTop = 86, kBottom = kPlotHeight - 92;
constexpr int kColumns = static_cast<int>(kRight - kLeft);

const char* const kAllocatedColour = "#1f77b4";
const char* const kReservedColour = "#ff7f0e";
const char* const kBudgetColour = "#d62728";
const char* const kCapacityColour = "#222222";

// The highest value of each of `columns` equal runs of `values`: exact peaks, any length.
std::vector<int64_t> envelope(const std::vector<int64_t>& values, int columns) {
  const size_t n = values.size();
  const size_t buckets = std::min(n, static_cast<size_t>(columns));
  std::vector<int64_t> top(buckets, 0);
  for (size_t b = 0; b < buckets; ++b) {
    const size_t from = b * n / buckets, to = (b + 1) * n / buckets;
    top[b] = *std::max_element(
        values.begin() + static_cast<std::ptrdiff_t>(from),
        values.begin() + static_cast<std::ptrdiff_t>(to));
  }
  return top;
}

class Canvas {
 public:
  Canvas(size_t events, int64_t y_max) : events_(events), y_max_(y_max) {}
  double x(double event) const {
    return kLeft + (kRight - kLeft) * event / static_cast<double>(std::max<size_t>(events_, 1));
  }
  double y(int64_t bytes) const {
    return kBottom - (kBottom - kTop) * static_cast<double>(bytes) / static_cast<double>(y_max_);
  }
  // A series' envelope as a polyline (and, with `fill`, the area under it).
  std::string series(const std::vector<int64_t>& values, const char* colour, bool fill) const {
    const std::vector<int64_t> top = envelope(values, kColumns);
    const double step = static_cast<double>(values.size()) / static_cast<double>(top.size());
    std::string points;
    for (size_t b = 0; b < top.size(); ++b) {
      // A step: the column's value from its first event to its last.
      points += num(x(static_cast<double>(b) * step)) + "," + num(y(top[b])) + " " +
                num(x(static_cast<double>(b + 1) * step)) + "," + num(y(top[b])) + " ";
    }
    std::string out;
    if (fill)
      out += "<polygon fill=\"" + std::string(colour) + "\" fill-opacity=\"0.18\" points=\"" +
             num(kLeft) + "," + num(kBottom) + " " + points + num(x(static_cast<double>(events_))) +
             "," + num(kBottom) + "\"/>\n";
    out += "<polyline fill=\"none\" stroke=\"" + std::string(colour) +
           "\" stroke-width=\"1.5\" points=\"" + points + "\"/>\n";
    return out;
  }

 private:
  size_t events_;
  int64_t y_max_;
};

// The y axis' range: the data, the budgets and (where near them) the card, with headroom,
// up to a whole tick.
struct YScale {
  int64_t step = 1;  // between ticks
  int64_t max = 1;   // the top of the axis
  bool capacity_drawn = false;
};

YScale y_scale(const MemoryPlot& plot) {
  int64_t data_max = 1;
  for (const auto* series : {&plot.allocated, &plot.reserved})
    if (!series->empty())
      data_max = std::max(data_max, *std::max_element(series->begin(), series->end()));
  for (const PhaseSpan& p : plot.phases)
    data_max = std::max(data_max, p.budget_bytes);
  YScale scale;
  // The card is drawn when it is near the data; far above, it would flatten everything.
  scale.capacity_drawn = plot.capacity_bytes > 0 && plot.capacity_bytes <= data_max + data_max / 2;
  if (scale.capacity_drawn)
    data_max = std::max(data_max, plot.capacity_bytes);
  scale.step = tick_step(data_max + data_max / 20);
  scale.max = (data_max + data_max / 20 + scale.step - 1) / scale.step * scale.step;
  return scale;
}

// The event after phase `i`'s last: the next one's first, or the end.
size_t phase_end(const MemoryPlot& plot, size_t i) {
  return i + 1 < plot.phases.size() ? plot.phases[i + 1].first : plot.allocated.size();
}

// Phases: shaded spans, each named; a name that would run into the one before it goes on
// a second row above.
void draw_phases(std::string& svg, const MemoryPlot& plot, const Canvas& c) {
  double row_end[2] = {-1e9, -1e9};
  for (size_t i = 0; i < plot.phases.size(); ++i) {
    const PhaseSpan& p = plot.phases[i];
    const size_t end = phase_end(plot, i);
    const double x0 = c.x(static_cast<double>(p.first)), x1 = c.x(static_cast<double>(end));
    svg += "<rect class=\"phase\" data-phase=\"" + xml_escape(p.name) + "\" x=\"" + num(x0) +
           "\" y=\"" + num(kTop) + "\" width=\"" + num(std::max(x1 - x0, 0.0)) + "\" height=\"" +
           num(kBottom - kTop) + "\" fill=\"" + (i % 2 == 0 ? "#eef2f7" : "#f8f8f8") +
           "\"><title>" + xml_escape(p.name) + "</title></rect>\n";
    const int row = x0 + 2 > row_end[0] ? 0 : 1;
    row_end[row] = x0 + 2 + 7.5 * static_cast<double>(p.name.size());
    svg += "<text x=\"" + num(x0 + 2) + "\" y=\"" + num(kTop - 6 - 16 * row) +
           "\" fill=\"#333333\">" + xml_escape(p.name) + "</text>\n";
  }
}

// The axes: gridlines and sizes up the y axis, the event count along the x axis.
void draw_axes(std::string& svg, const Canvas& c, const YScale& scale, size_t events) {
  for (int64_t v = 0; v <= scale.max; v += scale.step) {
    svg += "<line x1=\"" + num(kLeft) + "\" x2=\"" + num(kRight) + "\" y1=\"" + num(c.y(v)) +
           "\" y2=\"" + num(c.y(v)) + "\" stroke=\"#dddddd\"/>\n";
    svg += "<text class=\"tick\" data-bytes=\"" + std::to_string(v) + "\" x=\"" + num(kLeft - 8) +
           "\" y=\"" + num(c.y(v) + 4) + "\" text-anchor=\"end\">" + memory::format_size(v) +
           "</text>\n";
  }
  svg += "<line x1=\"" + num(kLeft) + "\" x2=\"" + num(kLeft) + "\" y1=\"" + num(kTop) +
         "\" y2=\"" + num(kBottom) + "\" stroke=\"#888888\"/>\n";
  svg += "<line x1=\"" + num(kLeft) + "\" x2=\"" + num(kRight) + "\" y1=\"" + num(kBottom) +
         "\" y2=\"" + num(kBottom) + "\" stroke=\"#888888\"/>\n";
  svg += "<text x=\"" + num((kLeft + kRight) / 2) + "\" y=\"" + num(kBottom + 22) +
         "\" text-anchor=\"middle\" fill=\"#555555\">allocation events (" + std::to_string(events) +
         ")</text>\n";
}

// Budgets over their phases, and the card where it is drawn.
void draw_limits(std::string& svg, const MemoryPlot& plot, const Canvas& c, bool capacity_drawn) {
  for (size_t i = 0; i < plot.phases.size(); ++i) {
    const PhaseSpan& p = plot.phases[i];
    if (p.budget_bytes < 0)
      continue;
    const size_t end = phase_end(plot, i);
    const double x0 = c.x(static_cast<double>(p.first)), x1 = c.x(static_cast<double>(end));
    const double y = c.y(p.budget_bytes);
    svg += "<line class=\"budget\" data-phase=\"" + xml_escape(p.name) + "\" data-bytes=\"" +
           std::to_string(p.budget_bytes) + "\" x1=\"" + num(x0) + "\" x2=\"" + num(x1) +
           "\" y1=\"" + num(y) + "\" y2=\"" + num(y) + "\" stroke=\"" + kBudgetColour +
           "\" stroke-width=\"2\" stroke-dasharray=\"8 4\"/>\n";
    if (x1 - x0 >= 110)
      svg += "<text x=\"" + num(x1 - 4) + "\" y=\"" + num(y - 5) +
             "\" text-anchor=\"end\" fill=\"" + kBudgetColour + "\">budget " +
             memory::format_size(p.budget_bytes) + "</text>\n";
  }
  if (capacity_drawn) {
    const double y = c.y(plot.capacity_bytes);
    svg += "<line class=\"capacity\" data-bytes=\"" + std::to_string(plot.capacity_bytes) +
           "\" x1=\"" + num(kLeft) + "\" x2=\"" + num(kRight) + "\" y1=\"" + num(y) + "\" y2=\"" +
           num(y) + "\" stroke=\"" + kCapacityColour + "\" stroke-width=\"2\"/>\n";
    svg += "<text x=\"" + num(kLeft + 4) + "\" y=\"" + num(y - 5) + "\">" +
           xml_escape(plot.capacity_label) + "</text>\n";
  }
}

// Each phase's peak; the highest one named with what was live at it.
void draw_peaks(std::string& svg, const MemoryPlot& plot, const Canvas& c) {
  const PhaseSpan* highest = nullptr;
  for (const PhaseSpan& p : plot.phases) {
    if (highest == nullptr || p.peak_bytes > highest->peak_bytes)
      highest = &p;
    svg += "<circle class=\"peak\" data-phase=\"" + xml_escape(p.name) + "\" data-bytes=\"" +
           std::to_string(p.peak_bytes) + "\" cx=\"" +
           num(c.x(static_cast<double>(p.peak_index) + 0.5)) + "\" cy=\"" + num(c.y(p.peak_bytes)) +
           "\" r=\"4\" fill=\"" + kAllocatedColour + "\"><title>" + xml_escape(p.name) + " peak " +
           memory::format_size(p.peak_bytes) + "</title></circle>\n";
  }
  if (highest == nullptr)
    return;
  std::string label = "peak " + memory::format_size(highest->peak_bytes) + " in " + highest->name;
  for (size_t k = 0; k < highest->live_at_peak.size() && k < 3; ++k)
    label += (k == 0 ? ": " : ", ") + highest->live_at_peak[k].tag + " " +
             memory::format_size(highest->live_at_peak[k].bytes);
  const double px = c.x(static_cast<double>(highest->peak_index) + 0.5);
  const bool right_half = px > (kLeft + kRight) / 2;
  svg += "<text class=\"peak-label\" x=\"" + num(right_half ? px - 8 : px + 8) + "\" y=\"" +
         num(std::max(c.y(highest->peak_bytes) - 8, kTop + 14)) + "\" text-anchor=\"" +
         (right_half ? "end" : "start") + "\" font-weight=\"bold\">" + xml_escape(label) +
         "</text>\n";
}

// The allocation that ran out of memory, where there was one.
void draw_oom(std::string& svg, const MemoryPlot& plot, const Canvas& c) {
  if (plot.oom_label.empty())
    return;
  const double x = c.x(static_cast<double>(plot.oom_index) + 0.5);
  svg += "<line class=\"oom\" x1=\"" + num(x) + "\" x2=\"" + num(x) + "\" y1=\"" + num(kTop) +
         "\" y2=\"" + num(kBottom) + "\" stroke=\"" + kBudgetColour + "\" stroke-width=\"2\"/>\n";
  svg += "<text x=\"" + num(x - 6) + "\" y=\"" + num(kBottom - 8) +
         "\" text-anchor=\"end\" fill=\"" + kBudgetColour + "\" font-weight=\"bold\">" +
         xml_escape(plot.oom_label) + "</text>\n";
}

// The legend: one entry per kind of line drawn, left to right under the plot.
class Legend {
 public:
  explicit Legend(std::string& svg) : svg_(svg) {}
  void add(const char* colour, const std::string& text, const char* dash) {
    svg_ += "<line x1=\"" + num(x_) + "\" x2=\"" + num(x_ + 24) + "\" y1=\"" + num(kY) +
            "\" y2=\"" + num(kY) + "\" stroke=\"" + colour + "\" stroke-width=\"2\"" +
            (dash[0] != '\0' ? std::string(" stroke-dasharray=\"") + dash + "\"" : "") + "/>\n";
    svg_ += "<text x=\"" + num(x_ + 30) + "\" y=\"" + num(kY + 4) + "\">" + xml_escape(text) +
            "</text>\n";
    x_ += 44 + 7.0 * static_cast<double>(text.size());
  }

 private:
  static constexpr double kY = kPlotHeight - 30;
  std::string& svg_;
  double x_ = kLeft;
};

void draw_legend(std::string& svg, const MemoryPlot& plot, bool capacity_drawn) {
  Legend legend(svg);
  legend.add(kAllocatedColour, "allocated", "");
  if (!plot.reserved.empty())
    legend.add(kReservedColour, plot.reserved_label, "");
  if (std::any_of(plot.phases.begin(), plot.phases.end(), [](const PhaseSpan& p) {
        return p.budget_bytes >= 0;
      }))
    legend.add(kBudgetColour, "phase budget", "8 4");
  if (plot.capacity_bytes > 0)
    legend.add(
        kCapacityColour,
        plot.capacity_label + (capacity_drawn ? "" : " (far above: not drawn)"),
        "");
}

}  // namespace

std::string render_svg(const MemoryPlot& plot) {
  const size_t n = plot.allocated.size();
  const YScale scale = y_scale(plot);
  const Canvas c(n, scale.max);
  std::string svg = svg_header(kPlotWidth, kPlotHeight, kLeft, plot.title, plot.subtitle);
  draw_phases(svg, plot, c);
  draw_axes(svg, c, scale, n);
  // Memory.
  if (!plot.reserved.empty())
    svg += c.series(plot.reserved, kReservedColour, /*fill=*/false);
  if (n > 0)
    svg += c.series(plot.allocated, kAllocatedColour, /*fill=*/true);
  draw_limits(svg, plot, c, scale.capacity_drawn);
  draw_peaks(svg, plot, c);
  draw_oom(svg, plot, c);
  draw_legend(svg, plot, scale.capacity_drawn);
  svg += "</svg>\n";
  return svg;
}

std::string wrap_html(const std::string& svg, const std::string& title) {
  return "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" + xml_escape(title) +
         "</title></head>\n<body style=\"margin:16px;background:#ffffff\">\n" + svg +
         "</body></html>\n";
}

}  // namespace oomguard::plot
