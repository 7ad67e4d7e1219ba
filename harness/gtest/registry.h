#pragma once
// What the GoogleTest layer remembers of the current test: its measured phases, their
// budgets and verdicts, and its seed, for the test's report (OOMGUARD_REPORT_DIR).
#include <cstdint>
#include <string>
#include <vector>

#include <oomguard/gtest.h>
#include <oomguard/memory/budgets.h>

namespace oomguard::testing::detail {

struct PhaseEntry {
  PhaseResult result;
  int64_t budget_bytes = 0;  // 0: none checked yet
  memory::PhaseStatus status = memory::PhaseStatus::kPass;
};

// "Suite.Name" of the running test ("(no test)" outside one).
std::string current_test_name();
// Adds a measured phase to the current test's record and writes its report.
void record_phase(const PhaseResult& result);
// Records the budget checked for `result` and the verdict, and writes the report again.
void record_verdict(const PhaseResult& result, int64_t budget_bytes, memory::PhaseStatus status);
// Records the seed of the current test.
void record_seed(uint64_t seed);

}  // namespace oomguard::testing::detail
