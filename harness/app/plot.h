#pragma once
// A picture as an application step: whatever `oomguard plot` is given (a trace or snapshot, a
// test's report, a replay report, a repeat summary, a comparison) drawn as one SVG. Nothing is
// written or printed here. No Torch.
#include <string>

namespace oomguard::app {

// `oomguard plot`'s options.
struct PlotRequest {
  std::string input, output, run_report, card, capacity, alloc_conf, torch_version;
};

struct Picture {
  std::string svg;
  std::string title;       // the HTML page's
  std::string what;        // "42338 events, 4 phases", for the line that says it was written
  bool of_events = false;  // drawn from a trace or snapshot (replayed; worth timing)
};

// The picture of `request.input`; throws UsageError naming a bad option or input.
Picture make_picture(const PlotRequest& request);

// True when `path` names an HTML page (.html), false for an SVG.
bool html_output(const std::string& path);

}  // namespace oomguard::app
