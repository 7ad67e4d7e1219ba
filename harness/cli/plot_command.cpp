#include "harness/cli/plot_command.h"

#include <chrono>
#include <cstdio>

#include "harness/app/inputs.h"
#include "harness/cli/exit_codes.h"
#include "harness/atomic_file.h"
#include "harness/plot/memory_plot.h"

namespace oomguard::cli {

int plot_command(const PlotArgs& args) {
  const auto start = std::chrono::steady_clock::now();
  const bool html = app::html_output(args.output);
  const bool svg = args.output.size() > 4 && args.output.substr(args.output.size() - 4) == ".svg";
  if (!html && !svg)
    throw UsageError("-o " + args.output + ": name an .svg or an .html file");
  app::check_writable(args.output, "-o");
  const app::Picture picture = app::make_picture(args);
  write_file_atomically(
      args.output, html ? plot::wrap_html(picture.svg, picture.title) : picture.svg);
  // "wrote FILE: WHAT, 12.3 KiB[, in 0.42 s]": a picture replayed from events says how long.
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  char took[32] = "";
  if (picture.of_events)
    std::snprintf(took, sizeof took, ", in %.2f s", seconds);
  std::printf(
      "wrote %s: %s, %.1f KiB%s\n",
      args.output.c_str(),
      picture.what.c_str(),
      static_cast<double>(picture.svg.size()) / 1024.0,
      took);
  return kExitPass;
}

}  // namespace oomguard::cli
