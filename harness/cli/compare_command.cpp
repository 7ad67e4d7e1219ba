#include "harness/cli/compare_command.h"

#include <cstdio>

#include "harness/atomic_file.h"
#include "harness/cli/exit_codes.h"
#include "harness/app/inputs.h"
#include "harness/compare/compare.h"
#include "harness/compare/render.h"

namespace oomguard::cli {

int compare_command(const CompareArgs& args) {
  const compare::Comparison c = app::given([&] {
    std::vector<compare::Limit> limits;
    for (const auto& text : args.limits)
      limits.push_back(compare::parse_limit(text));
    return compare::compare(compare::read_side(args.base), compare::read_side(args.head), limits);
  });

  if (!args.report_file.empty())
    write_file_atomically(args.report_file, compare::to_json(c).dump(2) + "\n");
  if (!args.markdown_file.empty())
    write_file_atomically(args.markdown_file, compare::render_markdown(c, args.markdown_rows));
  std::fputs(compare::render_text(c).c_str(), stdout);
  return c.over_limit().empty() ? kExitPass : kExitBudget;
}

}  // namespace oomguard::cli
