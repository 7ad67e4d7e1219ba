#pragma once
// What the GoogleTest layer remembers of the current test: its measured phases, their
// budgets and verdicts, and its seed, for the test's report (OOMGUARD_REPORT_DIR).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <oomguard/gtest.h>
#include <oomguard/memory/budgets.h>

namespace oomguard::testing::detail {

struct PhaseEntry {
  PhaseResult result;
  int64_t budget_bytes = 0;  // 0: none checked yet
  memory::PhaseStatus status = memory::PhaseStatus::kPass;
  std::string budget_key;         // the budgets file's key checked ("cpu", "cuda:t4"), "" for none
  bool budget_predicted = false;  // checked against the predicted figures, not the measured
};

// The budget a phase is checked against: its key in the budgets file and the figure.
struct BudgetCheck {
  memory::BudgetKey key;
  int64_t peak_bytes = 0;
  bool predicted = false;  // the model's prediction (CPU with a card), not the meter's bytes
};
BudgetCheck budget_check(const PhaseResult& phase);

// "phase train of Suite.Name ran out of memory: ..." (or "would run out of memory on t4"
// where the model predicted it).
std::string oom_message(const PhaseResult& phase);
// What was live at the peak, one tag per line, to follow a failure message.
std::string live_lines(const PhaseResult& phase);

// From the first call on, each test's start (each repetition's, under --gtest_repeat) clears
// that test's record and calls device_not_ready(); called by the first recorded phase and the
// first measure().
void watch_test_starts();
// The device is readied again before the running test's first measure() (measure.cpp, Note
// [a test measures the same whatever ran before it]).
void device_not_ready();

// "Suite.Name" of the running test ("(no test)" outside one).
std::string current_test_name();
// The test's name as a file name: a parameterised test's '/' written '_'
// ("Prefix/Suite.Case/0" -> "Prefix_Suite.Case_0").
std::string file_name_of(std::string test);
// Adds a measured phase to the current test's record and writes its report.
void record_phase(const PhaseResult& result);
// Records the budget checked for `result` and the verdict, and writes the report again.
// `check`: where the budget came from, null for a literal limit.
void record_verdict(
    const PhaseResult& result,
    int64_t budget_bytes,
    memory::PhaseStatus status,
    const BudgetCheck* check = nullptr);
// What each test of this process measured, by "Suite.Name": its phases, and the budgets key
// they are checked under ("cpu", "cuda:t4").
struct MeasuredTest {
  std::vector<std::string> phases;
  std::string budget_key;
};
std::map<std::string, MeasuredTest> measured_tests();

// Records the seed of the current test; `drawn` from its per-test counter (no OOMGUARD_SEED),
// so that each run has a seed of its own and its report is also kept as
// <Suite.Name>.seed-<seed>.json.
void record_seed(uint64_t seed, bool drawn);

// OOMGUARD_ACCEPT is set (and not 0): budgets are recorded instead of checked.
bool accepting();
// Budgets this process recorded with OOMGUARD_ACCEPT: one per test, phase and key, however
// often it was written.
int budgets_recorded();
void count_recorded_budget(const memory::BudgetKey& key);

}  // namespace oomguard::testing::detail
