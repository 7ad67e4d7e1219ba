#pragma once
// oomguard's GoogleTest layer: measure a phase of your own training code, assert its peak
// memory, keep budgets as data.
//
//   #include <oomguard/gtest.h>
//   TEST(CharLM, Memory) {
//     auto eval = oomguard::testing::measure("evaluate", [&] { evaluate(model, batches); });
//     EXPECT_PHASE_WITHIN_BUDGET(eval);            // budgets file, OOMGUARD_BUDGETS
//     EXPECT_PHASE_PEAK_BELOW(eval, "38MiB");      // or a literal limit
//   }
//
// Link oomguard::gtest_main (it installs the meter before anything else runs and brings
// main), or oomguard::gtest and call oomguard::memory::install_meter() first in your main.
//
// The environment, as `oomguard run` reads it:
//   OOMGUARD_DEVICE       auto (default: CUDA when built with it and a device is visible), cpu,
//   cuda OOMGUARD_CARD         an emulated card: t4, a100-40, a100-80, h200
//   (<oomguard/memory/cards.h>) OOMGUARD_CAPACITY     or an emulated capacity ("12GiB")
//   OOMGUARD_ALLOC_CONF   the CUDA caching allocator's settings (gtest_main applies them before
//                         CUDA starts)
//   OOMGUARD_SEED         the seed of every test; else a counter per test in
//                         OOMGUARD_SEED_COUNTER_DIR (default ./oomguard-seeds), so
//                         `ctest --repeat until-fail:N` tries a new seed each time
//   OOMGUARD_BUDGETS      the budgets file of EXPECT_PHASE_WITHIN_BUDGET
//   OOMGUARD_ACCEPT=1     write the measured peaks plus headroom into it instead of checking
//   OOMGUARD_REPORT_DIR   where each test's report (oomguard.report/1) is written
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <gtest/gtest.h>

#include <oomguard/memory/meter_stack.h>
#include <oomguard/memory/phase_scope.h>
#include <oomguard/sim/replay.h>

namespace oomguard::testing {

// The figures of one measured phase.
struct PhaseResult {
  std::string name;            // the phase, as given to measure()
  std::string test;            // "Suite.Name" of the test that measured it
  std::string meter;           // "cpu" or "cuda"
  std::string card;            // the emulated card, "" for none
  int64_t capacity_bytes = 0;  // the emulated capacity, 0 for none
  int64_t start_allocated_bytes = 0;
  int64_t peak_allocated_bytes = 0;
  int64_t end_allocated_bytes = 0;
  int64_t peak_reserved_bytes = -1;  // -1: not measured by this meter (CPU)
  int64_t num_alloc_retries = 0;     // the CUDA allocator freed its cache and retried
  double wall_seconds = 0.0;
  // What was live at the peak by tag (<oomguard/memory/alloc_site.h>), CPU only: the five
  // largest tags, the rest, and "(untagged)" for allocations made outside every tag.
  std::vector<sim::TagBytes> live_at_peak;
  std::string oom;        // the out-of-memory message when the phase ran out, else ""
  std::string untracked;  // why the meter may have missed allocations, "" when it saw all

  int64_t growth_bytes() const { return peak_allocated_bytes - start_allocated_bytes; }
};

// Runs `body` as the phase `name` of the current test and returns its figures. The peak is
// reset first; an out-of-memory error inside is caught, recorded in the result and reported
// as a test failure naming the phase. The figures also go into the test's XML properties
// ("oomguard.<name>.peak_allocated_bytes", ...) and its report in OOMGUARD_REPORT_DIR.
PhaseResult measure(const std::string& name, const std::function<void()>& body);

// The figures of a phase measured elsewhere (a memory::PhaseScope in your own loop, or a
// smoke run's phase) as a PhaseResult of the current test, for the assertions below. Its
// live_at_peak is the tags of the site phase of that name (memory::set_alloc_phase).
PhaseResult phase_result(const memory::PhaseMemory& figures);

// The meter stack measure() uses (installed from the environment on first use).
memory::MeterStack& meters();
// Where tensors of a measured test belong: CUDA device 0 when the meter is CUDA, else CPU.
c10::Device device();
// The thread count MemoryTest sets: OOMGUARD_THREADS, default 2. Throws
// std::invalid_argument naming the variable when it is not a whole number of 1 or more.
int test_threads();
// This test's seed (OOMGUARD_SEED, else this test's counter); also seeds LibTorch with it.
uint64_t seed_test();

// Assertion bodies for the macros below (GoogleTest predicate-formatters).
::testing::AssertionResult phase_peak_below(
    const char* phase_text,
    const char* limit_text,
    const PhaseResult& phase,
    const std::string& limit);
::testing::AssertionResult phase_within_budget(const char* phase_text, const PhaseResult& phase);
::testing::AssertionResult phase_growth_below(
    const char* phase_text,
    const char* limit_text,
    const PhaseResult& phase,
    const std::string& limit);
::testing::AssertionResult phase_no_near_oom(const char* phase_text, const PhaseResult& phase);

// A fixture for memory tests: seeds LibTorch with seed_test() and sets LibTorch's thread
// count to OOMGUARD_THREADS (default 2), so figures do not depend on the machine's cores.
class MemoryTest : public ::testing::Test {
 protected:
  void SetUp() override;
};

}  // namespace oomguard::testing

// The phase's peak allocated bytes are at most `limit` ("38MiB").
#define EXPECT_PHASE_PEAK_BELOW(phase, limit) \
  EXPECT_PRED_FORMAT2(::oomguard::testing::phase_peak_below, phase, limit)
#define ASSERT_PHASE_PEAK_BELOW(phase, limit) \
  ASSERT_PRED_FORMAT2(::oomguard::testing::phase_peak_below, phase, limit)
// The phase's peak is within its budget in the budgets file (OOMGUARD_BUDGETS); with
// OOMGUARD_ACCEPT=1 the measured peak plus headroom is written there instead.
#define EXPECT_PHASE_WITHIN_BUDGET(phase) \
  EXPECT_PRED_FORMAT1(::oomguard::testing::phase_within_budget, phase)
#define ASSERT_PHASE_WITHIN_BUDGET(phase) \
  ASSERT_PRED_FORMAT1(::oomguard::testing::phase_within_budget, phase)
// Peak minus start is at most `limit`: what the phase added on top of what it was given.
#define EXPECT_PHASE_GROWTH_BELOW(phase, limit) \
  EXPECT_PRED_FORMAT2(::oomguard::testing::phase_growth_below, phase, limit)
#define ASSERT_PHASE_GROWTH_BELOW(phase, limit) \
  ASSERT_PRED_FORMAT2(::oomguard::testing::phase_growth_below, phase, limit)
// The allocator never had to free its cache and retry (a near-OOM; CUDA).
#define EXPECT_PHASE_NO_NEAR_OOM(phase) \
  EXPECT_PRED_FORMAT1(::oomguard::testing::phase_no_near_oom, phase)
#define ASSERT_PHASE_NO_NEAR_OOM(phase) \
  ASSERT_PRED_FORMAT1(::oomguard::testing::phase_no_near_oom, phase)
