#pragma once
// `oomguard plot`: memory over a run as a picture (SVG, or the SVG in an HTML page).
#include <string>

namespace CLI {
class App;
}  // namespace CLI

namespace oomguard::cli {

struct PlotArgs {
  std::string input, output, run_report, card, capacity, alloc_conf, torch_version;
};

// Declares `oomguard plot`'s options on `app`, filling `args` (harness/cli/main.cpp, the one
// file that compiles CLI11).
void add_plot_options(CLI::App& app, PlotArgs& args);

// Writes the picture; returns the exit code (0; bad input throws UsageError).
int plot_command(const PlotArgs& args);

}  // namespace oomguard::cli
