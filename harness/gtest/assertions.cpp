#include <cstdlib>
#include <optional>
#include <iostream>
#include <sstream>
#include <string>

#include <oomguard/gtest.h>
#include <oomguard/memory/budgets.h>
#include <oomguard/memory/live_by_tag.h>
#include <oomguard/memory/sizes.h>
#include "harness/gtest/registry.h"

namespace oomguard::testing {
namespace {

// What was live at the peak, one tag per line, under a failure message.
std::string live_lines(const PhaseResult& phase) {
  if (phase.live_at_peak.empty())
    return phase.meter == "cuda" ? "" : "\n  (no allocation was seen during the phase)";
  std::string text = "\n  live at the peak, by tag:";
  for (const auto& [tag, bytes] : phase.live_at_peak) {
    const std::string size = memory::format_size(bytes);
    text +=
        "\n    " + std::string(size.size() < 10 ? 10 - size.size() : 0, ' ') + size + "  " + tag;
  }
  return text;
}

// A problem that makes every assertion on the phase fail: an OOM, or figures the meter may
// have missed. Empty when there is none.
std::string unusable(const PhaseResult& phase) {
  if (!phase.oom.empty())
    return "phase " + phase.name + " of " + phase.test + " ran out of memory: " + phase.oom;
  if (!phase.untracked.empty())
    return "phase " + phase.name + " of " + phase.test +
           ": its figures may be low: " + phase.untracked;
  return "";
}

// What ends an assertion with a limit before it compares: an unusable phase or a limit that
// is not a size. Empty when it may go on, with `bytes` set to the limit.
std::string cannot_compare(
    const PhaseResult& phase, const char* limit_text, const std::string& limit, int64_t& bytes) {
  if (std::string problem = unusable(phase); !problem.empty())
    return problem;
  try {
    bytes = memory::parse_size(limit);
  } catch (const std::invalid_argument& e) {
    return std::string("the limit ") + limit_text + ": " + e.what();
  }
  return "";
}

bool accepting() {
  const char* accept = std::getenv("OOMGUARD_ACCEPT");
  return accept != nullptr && *accept != '\0' && std::string(accept) != "0";
}

}  // namespace

::testing::AssertionResult phase_peak_below(
    const char*, const char* limit_text, const PhaseResult& phase, const std::string& limit) {
  int64_t bytes = 0;
  if (const std::string problem = cannot_compare(phase, limit_text, limit, bytes); !problem.empty())
    return ::testing::AssertionFailure() << problem;
  const std::string over = memory::over_budget_message(
      phase.name, phase.test, phase.peak_allocated_bytes, bytes, phase.start_allocated_bytes);
  detail::record_verdict(
      phase,
      bytes,
      over.empty() ? memory::PhaseStatus::kPass : memory::PhaseStatus::kBudgetExceeded);
  if (over.empty())
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << over << live_lines(phase);
}

::testing::AssertionResult phase_within_budget(const char*, const PhaseResult& phase) {
  if (const std::string problem = unusable(phase); !problem.empty())
    return ::testing::AssertionFailure() << problem;
  const char* path = std::getenv("OOMGUARD_BUDGETS");
  if (path == nullptr || *path == '\0')
    return ::testing::AssertionFailure()
           << "phase " << phase.name << " of " << phase.test
           << ": no budgets file; set OOMGUARD_BUDGETS to one (it may not exist yet) and run "
              "with OOMGUARD_ACCEPT=1 to record the peaks";
  const memory::BudgetKey key{phase.test, phase.name, phase.meter, phase.card};
  if (accepting()) {
    const int64_t budget = memory::accept_budget(path, key, phase.peak_allocated_bytes);
    detail::record_verdict(phase, budget, memory::PhaseStatus::kPass);
    std::cout << "[ oomguard ] " << path << ": " << phase.test << " " << phase.name << " "
              << phase.meter << " = " << memory::format_size(budget) << " (peak "
              << memory::format_size(phase.peak_allocated_bytes) << ")\n";
    return ::testing::AssertionSuccess();
  }
  const memory::BudgetFile file = memory::load_budgets(path);
  const std::optional<int64_t> budget = file.find(key);
  if (!budget)
    return ::testing::AssertionFailure()
           << "phase " << phase.name << " of " << phase.test << " has no budget for "
           << (phase.card.empty() ? phase.meter : phase.meter + ":" + phase.card) << " in " << path
           << " (it peaked at " << memory::format_size(phase.peak_allocated_bytes)
           << "); record one with OOMGUARD_ACCEPT=1 OOMGUARD_BUDGETS=" << path
           << " and review the diff";
  const std::string over = memory::over_budget_message(
      phase.name, phase.test, phase.peak_allocated_bytes, *budget, phase.start_allocated_bytes);
  detail::record_verdict(
      phase,
      *budget,
      over.empty() ? memory::PhaseStatus::kPass : memory::PhaseStatus::kBudgetExceeded);
  if (over.empty())
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << over << live_lines(phase);
}

::testing::AssertionResult phase_growth_below(
    const char*, const char* limit_text, const PhaseResult& phase, const std::string& limit) {
  int64_t bytes = 0;
  if (const std::string problem = cannot_compare(phase, limit_text, limit, bytes); !problem.empty())
    return ::testing::AssertionFailure() << problem;
  if (phase.growth_bytes() <= bytes)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "phase " << phase.name << " of " << phase.test << " grew by "
         << memory::format_size(phase.growth_bytes()) << " (from "
         << memory::format_size(phase.start_allocated_bytes) << " to a peak of "
         << memory::format_size(phase.peak_allocated_bytes) << "), over its limit "
         << memory::format_size(bytes) << live_lines(phase);
}

::testing::AssertionResult phase_no_near_oom(const char*, const PhaseResult& phase) {
  if (const std::string problem = unusable(phase); !problem.empty())
    return ::testing::AssertionFailure() << problem;
  if (phase.num_alloc_retries == 0)
    return ::testing::AssertionSuccess();
  detail::record_verdict(phase, 0, memory::PhaseStatus::kNearOom);
  return ::testing::AssertionFailure()
         << "phase " << phase.name << " of " << phase.test << " nearly ran out of memory: the "
         << "caching allocator freed its cache and retried " << phase.num_alloc_retries
         << " time(s) (peak reserved " << memory::format_size(phase.peak_reserved_bytes) << ")";
}

}  // namespace oomguard::testing
