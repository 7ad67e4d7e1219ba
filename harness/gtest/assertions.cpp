#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <oomguard/gtest.h>
#include <oomguard/memory/budgets.h>
#include <oomguard/memory/live_by_tag.h>
#include <oomguard/memory/sizes.h>
#include "harness/gtest/registry.h"

namespace oomguard::testing {
namespace detail {

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

std::string oom_message(const PhaseResult& phase) {
  const std::string head = "phase " + phase.name + " of " + phase.test;
  if (!phase.predictions.empty() && !phase.predictions.front().oom.empty())
    return head + " would run out of memory on " + phase.predictions.front().label +
           " (predicted by the caching-allocator model): " + phase.oom;
  return head + " ran out of memory: " + phase.oom;
}

BudgetCheck budget_check(const PhaseResult& phase) {
  if (!phase.predictions.empty()) {
    const Prediction& p = phase.predictions.front();
    return {
        {phase.test, phase.name, "cuda", p.card, /*predicted=*/true}, p.peak_allocated_bytes, true};
  }
  return {{phase.test, phase.name, phase.meter, phase.card}, phase.peak_allocated_bytes, false};
}

}  // namespace detail

namespace {

using detail::live_lines;

// A problem that makes every assertion on the phase fail: an OOM, or figures the meter may
// have missed. Empty when there is none.
std::string unusable(const PhaseResult& phase) {
  if (!phase.oom.empty())
    return "phase " + phase.name + " of " + phase.test +
           " has no figures to check: it ran out of memory (reported where it was measured)";
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

}  // namespace

namespace detail {

bool accepting() {
  const char* accept = std::getenv("OOMGUARD_ACCEPT");
  return accept != nullptr && *accept != '\0' && std::string(accept) != "0";
}

namespace {
std::mutex g_recorded_mutex;
std::set<std::string> g_recorded;  // "test/phase/key" of each budget accepted
}  // namespace

int budgets_recorded() {
  std::lock_guard<std::mutex> lock(g_recorded_mutex);
  return static_cast<int>(g_recorded.size());
}

void count_recorded_budget(const memory::BudgetKey& key) {
  std::lock_guard<std::mutex> lock(g_recorded_mutex);
  g_recorded.insert(key.test + "/" + key.phase + "/" + key.device_key());
}

}  // namespace detail

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
  const detail::BudgetCheck check = detail::budget_check(phase);
  const memory::BudgetKey& key = check.key;
  const std::string key_text = key.device_key();
  const std::string figure = check.predicted ? "predicted " : "";
  if (detail::accepting()) {
    const int64_t budget = memory::accept_budget(path, key, check.peak_bytes);
    detail::count_recorded_budget(key);
    detail::record_verdict(phase, budget, memory::PhaseStatus::kPass, &check);
    std::cout << "[ oomguard ] " << path << ": " << phase.test << " " << phase.name << " "
              << (check.predicted ? key_text : phase.meter) << " = " << memory::format_size(budget)
              << " (" << figure << "peak " << memory::format_size(check.peak_bytes) << ")\n";
    return ::testing::AssertionSuccess();
  }
  const memory::BudgetFile file = memory::load_budgets(path);
  const std::optional<int64_t> budget = file.find(key);
  if (!budget)
    return ::testing::AssertionFailure()
           << "phase " << phase.name << " of " << phase.test << " has no budget for " << key_text
           << " in " << path << " (its " << figure << "peak is "
           << memory::format_size(check.peak_bytes) << "); record one with OOMGUARD_ACCEPT=1 "
           << "OOMGUARD_BUDGETS=" << path << " and review the diff";
  std::string over = memory::over_budget_message(
      phase.name, phase.test, check.peak_bytes, *budget, phase.start_allocated_bytes);
  detail::record_verdict(
      phase,
      *budget,
      over.empty() ? memory::PhaseStatus::kPass : memory::PhaseStatus::kBudgetExceeded,
      &check);
  if (over.empty())
    return ::testing::AssertionSuccess();
  if (check.predicted)
    over += "; predicted for " + phase.predictions.front().label +
            " by the caching-allocator model (the CPU run peaked at " +
            memory::format_size(phase.peak_allocated_bytes) + ")";
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
  std::ostringstream retried;
  int64_t retries = phase.num_alloc_retries;
  if (phase.num_alloc_retries > 0)
    retried << " " << phase.num_alloc_retries << " time(s) (peak reserved "
            << memory::format_size(phase.peak_reserved_bytes) << ")";
  for (const Prediction& p : phase.predictions) {
    if (p.num_alloc_retries == 0)
      continue;
    retries += p.num_alloc_retries;
    retried << "\n  " << p.num_alloc_retries << " time(s) predicted on " << p.label
            << " (peak reserved " << memory::format_size(p.peak_reserved_bytes) << ")";
  }
  if (retries == 0)
    return ::testing::AssertionSuccess();
  detail::record_verdict(phase, 0, memory::PhaseStatus::kNearOom);
  return ::testing::AssertionFailure()
         << "phase " << phase.name << " of " << phase.test << " nearly ran out of memory: the "
         << "caching allocator freed its cache and retried" << retried.str();
}

namespace {

// Why a phase has no reserved figure to check, or "" when it has: measured on CUDA,
// predicted on CPU with a card or capacity.
std::string no_reserved_figure(const PhaseResult& phase) {
  if (phase.meter == "cuda" || !phase.predictions.empty())
    return "";
  return "phase " + phase.name + " of " + phase.test +
         ": the CPU meter measures no reserved memory; set OOMGUARD_CARD or OOMGUARD_CAPACITY "
         "to have the caching-allocator model predict it";
}

// The reserved figures of a phase: the measured one on CUDA, else each prediction's.
struct ReservedFigure {
  std::string label;  // "measured", or the prediction's card and settings
  int64_t capacity_bytes = 0;
  int64_t peak_reserved_bytes = 0;
  std::string oom;
  std::string order;  // in any order: the order it was found in, and the search's figures
};

// "0, 3, 1, 2"
std::string order_text(const std::vector<int>& order) {
  std::string text;
  for (const int step : order)
    text += (text.empty() ? "" : ", ") + std::to_string(step);
  return text;
}

// Each card's figure; `any_order`: of the worst order searched where it is higher (or runs
// out) than the order run.
std::vector<ReservedFigure> reserved_figures(const PhaseResult& phase, bool any_order = false) {
  std::vector<ReservedFigure> figures;
  if (phase.meter == "cuda") {
    figures.push_back({"measured", phase.capacity_bytes, phase.peak_reserved_bytes, phase.oom, ""});
    return figures;
  }
  for (const Prediction& p : phase.predictions) {
    ReservedFigure& f = figures.emplace_back(
        ReservedFigure{p.label, p.capacity_bytes, p.peak_reserved_bytes, p.oom, ""});
    const StepOrders& o = p.orders;
    if (!any_order || !o.searched() || !f.oom.empty())
      continue;
    if (!o.highest_oom.empty() || o.highest_reserved_bytes > f.peak_reserved_bytes) {
      f.peak_reserved_bytes = std::max(f.peak_reserved_bytes, o.highest_reserved_bytes);
      f.oom = o.highest_oom;
      f.order = " in the order " + order_text(o.highest_order) +
                " of its steps (the order run: " + memory::format_size(o.recorded_reserved_bytes) +
                "; " + std::to_string(o.orders_tried) + " orders replayed, reserved " +
                memory::format_size(o.lowest_reserved_bytes) + " .. " +
                memory::format_size(o.highest_reserved_bytes) + "; measure_steps(\"" + phase.name +
                "\", {" + order_text(o.highest_order) + "}, step) runs it)";
    }
  }
  return figures;
}

// `margin` of `capacity`: "10%" of it, or a size.
int64_t margin_bytes(const std::string& margin, int64_t capacity) {
  if (!margin.empty() && margin.back() == '%') {
    size_t used = 0;
    double percent = -1;
    try {
      percent = std::stod(margin.substr(0, margin.size() - 1), &used);
    } catch (const std::exception&) {
    }
    if (used + 1 != margin.size() || percent < 0 || percent >= 100)
      throw std::invalid_argument("\"" + margin + "\" is not a percentage from 0% to below 100%");
    return static_cast<int64_t>(static_cast<double>(capacity) * percent / 100.0);
  }
  return memory::parse_size(margin);
}

}  // namespace

::testing::AssertionResult phase_reserved_below(
    const char*, const char* limit_text, const PhaseResult& phase, const std::string& limit) {
  int64_t bytes = 0;
  if (const std::string problem = cannot_compare(phase, limit_text, limit, bytes); !problem.empty())
    return ::testing::AssertionFailure() << problem;
  if (const std::string none = no_reserved_figure(phase); !none.empty())
    return ::testing::AssertionFailure() << none;
  std::string over;
  for (const ReservedFigure& f : reserved_figures(phase))
    if (f.peak_reserved_bytes > bytes)
      over += "\n  " + f.label + ": peak reserved " + memory::format_size(f.peak_reserved_bytes);
  if (over.empty())
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "phase " << phase.name << " of " << phase.test << " reserved more than its limit "
         << memory::format_size(bytes) << ":" << over << live_lines(phase);
}

namespace {

// EXPECT_PHASE_FITS_CARD, and with `any_order` EXPECT_PHASE_FITS_CARD_IN_ANY_ORDER.
::testing::AssertionResult fits_card(
    const char* margin_text, const PhaseResult& phase, const std::string& margin, bool any_order) {
  if (!phase.untracked.empty())
    return ::testing::AssertionFailure() << unusable(phase);
  if (const std::string none = no_reserved_figure(phase); !none.empty())
    return ::testing::AssertionFailure() << none;
  if (any_order && phase.meter != "cuda" && phase.step_end_bytes.empty())
    return ::testing::AssertionFailure()
           << "phase " << phase.name << " of " << phase.test
           << " has no steps to put in other orders: measure it with measure_steps()";
  // Where the phase ran out, the verdicts below say so; else each card's orders must be there.
  if (any_order && phase.oom.empty())
    for (const Prediction& p : phase.predictions)
      if (!p.orders.searched() && p.oom.empty())
        return ::testing::AssertionFailure() << "phase " << phase.name << " of " << phase.test
                                             << ": no orders of its steps were searched for "
                                             << p.label << ": " << p.orders.why_not;
  std::string verdicts;
  bool all_fit = true;
  for (const ReservedFigure& f : reserved_figures(phase, any_order)) {
    if (f.capacity_bytes <= 0)
      return ::testing::AssertionFailure()
             << "phase " << phase.name << " of " << phase.test
             << ": no card to fit; set OOMGUARD_CARD or OOMGUARD_CAPACITY";
    int64_t spare = 0;
    try {
      spare = margin_bytes(margin, f.capacity_bytes);
    } catch (const std::invalid_argument& e) {
      return ::testing::AssertionFailure() << "the margin " << margin_text << ": " << e.what();
    }
    const int64_t limit = f.capacity_bytes - spare;
    const bool fits = f.oom.empty() && f.peak_reserved_bytes <= limit;
    all_fit = all_fit && fits;
    verdicts +=
        "\n  " + f.label + ": " +
        (!f.oom.empty() ? "out of memory, asking for " +
                              memory::format_size(memory::requested_bytes_from_oom_message(f.oom))
                        : std::string(fits ? "fits" : "too close") + ", peak reserved " +
                              memory::format_size(f.peak_reserved_bytes) + " of " +
                              memory::format_size(f.capacity_bytes) + " (at most " +
                              memory::format_size(limit) + " with the margin)") +
        f.order;
  }
  if (all_fit)
    return ::testing::AssertionSuccess();
  detail::record_verdict(
      phase,
      0,
      phase.oom.empty() ? memory::PhaseStatus::kBudgetExceeded : memory::PhaseStatus::kOom);
  return ::testing::AssertionFailure()
         << "phase " << phase.name << " of " << phase.test << " does not fit"
         << (any_order ? " in every order of its steps" : "") << " with a margin of " << margin
         << ":" << verdicts << live_lines(phase);
}

}  // namespace

::testing::AssertionResult phase_fits_card(
    const char*, const char* margin_text, const PhaseResult& phase, const std::string& margin) {
  return fits_card(margin_text, phase, margin, /*any_order=*/false);
}

::testing::AssertionResult phase_fits_card_in_any_order(
    const char*, const char* margin_text, const PhaseResult& phase, const std::string& margin) {
  return fits_card(margin_text, phase, margin, /*any_order=*/true);
}

::testing::AssertionResult phase_no_step_growth(
    const char*,
    const char* tolerance_text,
    const PhaseResult& phase,
    const std::string& tolerance) {
  int64_t bytes = 0;
  if (const std::string problem = cannot_compare(phase, tolerance_text, tolerance, bytes);
      !problem.empty())
    return ::testing::AssertionFailure() << problem;
  const std::vector<int64_t>& ends = phase.step_end_bytes;
  if (ends.size() < 2)
    return ::testing::AssertionFailure()
           << "phase " << phase.name << " of " << phase.test << " has " << ends.size()
           << " step(s) measured: give it to measure_steps() with 2 steps or more";
  // The first step may create what the loop keeps (optimizer state): the steps after it, by
  // their median, so one step that creates something once is not a leak per step.
  std::vector<int64_t> deltas;
  for (size_t i = 1; i < ends.size(); ++i)
    deltas.push_back(ends[i] - ends[i - 1]);
  std::vector<int64_t> sorted = deltas;
  std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
  const int64_t per_step = sorted[sorted.size() / 2];
  if (per_step <= bytes)
    return ::testing::AssertionSuccess();
  std::string steps;
  for (size_t i = 0; i < deltas.size(); ++i)
    steps += (i > 0 ? ", " : "") + std::to_string(i + 1) + ": " + (deltas[i] >= 0 ? "+" : "-") +
             memory::format_size(std::llabs(deltas[i]));
  return ::testing::AssertionFailure()
         << "phase " << phase.name << " of " << phase.test << " keeps "
         << memory::format_size(per_step)
         << " more after each step (the median), over the tolerance " << memory::format_size(bytes)
         << " (after step " << steps << "; " << memory::format_size(ends.front())
         << " after step 0, " << memory::format_size(ends.back()) << " after step "
         << ends.size() - 1
         << "): something each step makes stays referenced, such as a tensor kept without "
            ".detach() or a list that grows";
}

}  // namespace oomguard::testing
