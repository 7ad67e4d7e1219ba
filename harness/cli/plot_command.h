#pragma once
// `oomguard plot`: parse (harness/cli/main.cpp) -> app::make_picture -> the SVG or HTML file
// and the line that says so.
#include "harness/app/plot.h"

namespace CLI {
class App;
}  // namespace CLI

namespace oomguard::cli {

// `oomguard plot`'s options: the application's plot request.
using PlotArgs = app::PlotRequest;

// Declares `oomguard plot`'s options on `app`, filling `args` (harness/cli/main.cpp, the one
// file that compiles CLI11).
void add_plot_options(CLI::App& app, PlotArgs& args);

// Writes the picture; returns the exit code (0; bad input throws UsageError).
int plot_command(const PlotArgs& args);

}  // namespace oomguard::cli
