#include "harness/cli/run_command.h"

#include <cstdio>
#include <iostream>

#include "harness/memory/built_torch.h"
#include "harness/cli/exit_codes.h"
#include <oomguard/memory/sizes.h>

namespace oomguard::cli {
namespace {

void print_table(const run::RunReport& report) {
  using memory::format_size;
  // Measured on CUDA, predicted by the allocator model: not there on a plain CPU run.
  const bool reserved = !report.phases.empty() && report.phases[0].memory.peak_reserved_bytes >= 0;
  const nlohmann::json& worst = report.worst_case;
  if (worst.is_object())
    std::printf(
        "worst case (--worst-case): each phase on the worst inputs its data allows; the "
        "allocated peaks bound every seed's and data order's%s\n",
        reserved ? " (reserved: the highest found, a lower bound on the worst)" : "");
  std::printf("%-10s %-16s %12s %12s %9s", "phase", "status", "peak", "budget", "headroom");
  if (reserved)
    std::printf(" %12s %8s", "reserved", "retries");
  std::printf(" %8s\n", "seconds");
  for (const auto& p : report.phases) {
    std::printf(
        "%-10s %-16s %12s %12s %8.1f%%",
        p.memory.name.c_str(),
        memory::to_string(p.status),
        format_size(p.memory.peak_allocated_bytes).c_str(),
        format_size(p.budget_bytes).c_str(),
        run::headroom_percent(p));
    if (reserved)
      std::printf(
          " %12s %8lld",
          format_size(p.memory.peak_reserved_bytes).c_str(),
          static_cast<long long>(p.memory.num_alloc_retries));
    std::printf(" %8.2f\n", p.memory.wall_seconds);
  }
  std::printf("outcome: %s\n", memory::to_string(report.outcome));
  if (worst.is_object()) {
    for (const auto& p : worst.at("phases"))
      if (!p.at("attained").get<bool>())
        std::printf(
            "%s (an upper bound): %s\n",
            p.at("name").get<std::string>().c_str(),
            p.at("how").get<std::string>().c_str());
    std::printf("reproduce: %s\n", worst.at("reproduce").get<std::string>().c_str());
    const nlohmann::json& searched = worst.at("reserved");
    if (searched.is_object() && searched.at("searched").get<bool>())
      std::printf(
          "reserved over %lld orders of the steps: %s .. %s (the run's own %s); the highest, "
          "%s: %s\n",
          static_cast<long long>(searched.at("orders_tried").get<int64_t>()),
          format_size(searched.at("lowest_bytes").get<int64_t>()).c_str(),
          format_size(searched.at("highest_bytes").get<int64_t>()).c_str(),
          format_size(searched.at("own").at("peak_reserved_bytes").get<int64_t>()).c_str(),
          searched.at("highest").at("how").get<std::string>().c_str(),
          searched.at("reproduce_highest").get<std::string>().c_str());
    else if (searched.is_object())
      std::printf(
          "reserved: no order searched: %s\n", searched.at("why_not").get<std::string>().c_str());
  }
}

}  // namespace

int run_command(const RunArgs& args) {
  // Everything the user gave is checked before anything runs.
  const app::ResolvedRun resolved = app::resolve_run(args);
  const run::RunConfig& config = resolved.config;
  if (args.print_config) {
    std::cout << config.resolved.dump(2) << "\n";
    return kExitPass;
  }
  if (args.print_budgets) {
    std::cout << run::budgets_document(
        {{"train", config.budgets.train},
         {"evaluate", config.budgets.evaluate},
         {"generate", config.budgets.generate}},
        memory::built_torch_version());
    return kExitPass;
  }
  const run::RunReport report = app::execute_run(args, resolved, print_table);
  return exit_code(report.outcome);
}

}  // namespace oomguard::cli
