#pragma once
// `oomguard compare BASE HEAD`: what a change did to memory, by test, phase and tag.
#include <string>
#include <vector>

namespace CLI {
class App;
}  // namespace CLI

namespace oomguard::cli {

struct CompareArgs {
  std::string base, head;
  std::vector<std::string> limits;  // --fail-above, [PHASE=]N% or [PHASE=]SIZE
  std::string markdown_file, report_file;
  size_t markdown_rows = 10;
};

// Declares `oomguard compare`'s options on `app` (harness/cli/main.cpp).
void add_compare_options(CLI::App& app, CompareArgs& args);

// Prints the comparison and writes the Markdown and JSON asked for; returns 0 (no change, or
// none over a limit) or 1 (a phase over its limit). Inputs that cannot be compared throw
// compare::InputError, a bad limit std::invalid_argument (exit 2), before anything is written.
int compare_command(const CompareArgs& args);

}  // namespace oomguard::cli
