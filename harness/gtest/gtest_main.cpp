// main of oomguard::gtest_main. The CPU tracking allocator is installed before this binary's
// own static initializers run (harness/memory/tracking_allocator.cpp), so a model built in a
// static or a test suite's SetUp is counted. Here, before any test: the CUDA caching
// allocator's settings (OOMGUARD_ALLOC_CONF) go into LibTorch's variable and
// OOMGUARD_DEVICE=cuda:N narrows the binary to that device, starting the process again when
// either is not so yet, and the meter stack is built from the environment, so a bad
// OOMGUARD_* variable stops the binary with exit code 2 and a message.
#include <cstdlib>
#include <iostream>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "harness/memory/built_torch.h"
#include <oomguard/gtest.h>
#include <oomguard/memory/budgets.h>
#include <oomguard/memory/meter_stack.h>
#include <oomguard/sim/alloc_conf.h>
#include "harness/gtest/registry.h"
#include "harness/memory/start_again.h"

namespace {

// What the binary must start again with (execv does not return), in one start:
// OOMGUARD_DEVICE=cuda:N with N > 0 is measured as device 0 of a process that sees that
// device alone (CUDA_VISIBLE_DEVICES), as `oomguard run --device cuda:N` is; the caching
// allocator reads its settings (OOMGUARD_ALLOC_CONF) from LibTorch's variables once, possibly
// when LibTorch loads.
oomguard::memory::EnvSettings settings_to_start_again_with() {
  oomguard::memory::EnvSettings settings = oomguard::memory::device_from_env().narrowing;
  const char* wanted = std::getenv("OOMGUARD_ALLOC_CONF");
  if (wanted == nullptr || *wanted == '\0')
    return settings;
  const oomguard::sim::TorchVersion torch = oomguard::memory::built_torch_version();
  try {
    oomguard::sim::validate_alloc_conf(wanted, torch);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("OOMGUARD_ALLOC_CONF: ") + e.what());
  }
  for (const char* variable : oomguard::sim::alloc_conf_variables(torch)) {
    const char* current = std::getenv(variable);
    if (current == nullptr || std::string(current) != wanted) {
      for (auto& setting : oomguard::memory::alloc_conf_settings(wanted))
        settings.push_back(std::move(setting));
      break;
    }
  }
  return settings;
}

// Budgets of phases that a test which passed here no longer measures: listed, and removed
// with OOMGUARD_ACCEPT=prune. (A test that failed or was skipped may have stopped before a
// phase; a test not run here is judged where it runs.)
void check_stale_budgets(const std::string& path, const std::string& accept) {
  if (path.empty())
    return;
  oomguard::memory::BudgetFile file;
  try {
    file = oomguard::memory::load_budgets(path);
  } catch (const std::exception&) {
    return;  // a malformed file fails the budget assertions, which say why
  }
  const bool prune = accept == "prune";
  const auto measured = oomguard::testing::detail::measured_tests();
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  for (int s = 0; s < unit.total_test_suite_count(); ++s) {
    const ::testing::TestSuite& suite = *unit.GetTestSuite(s);
    for (int t = 0; t < suite.total_test_count(); ++t) {
      const ::testing::TestInfo& info = *suite.GetTestInfo(t);
      const std::string name = std::string(suite.name()) + "." + info.name();
      const auto test = measured.find(name);
      if (!info.should_run() || !info.result()->Passed() || info.result()->Skipped() ||
          test == measured.end())
        continue;
      const std::string& key = test->second.budget_key;
      const std::vector<std::string> stale =
          oomguard::memory::stale_phases(file, name, test->second.phases, key);
      if (stale.empty())
        continue;
      std::string list;
      for (const auto& phase : stale)
        list += (list.empty() ? "" : ", ") + phase;
      if (!prune) {
        std::cout << "[ oomguard ] " << path << ": " << name << " has " << key
                  << " budgets for phases it no longer measures: " << list
                  << " (OOMGUARD_ACCEPT=prune removes them)\n";
        continue;
      }
      try {
        oomguard::memory::remove_budgets(path, name, stale, key);
        std::cout << "[ oomguard ] " << path << ": removed the " << key << " budgets of " << name
                  << "'s phases it no longer measures: " << list << "\n";
      } catch (const std::exception& e) {
        std::cerr << "oomguard: removing stale budgets: " << e.what() << "\n";
      }
    }
  }
}

// With OOMGUARD_ACCEPT=1: says what was recorded, and fails when no test ran at all (a filter
// that matched nothing would otherwise look like budgets recorded).
int report_accepted(int result, const std::string& path, const std::string& accept) {
  const int recorded = oomguard::testing::detail::budgets_recorded();
  if (::testing::UnitTest::GetInstance()->test_to_run_count() == 0) {
    std::cerr << "oomguard: OOMGUARD_ACCEPT=" << accept
              << ", but no test ran, so no budget was recorded; check --gtest_filter (under "
                 "ctest, ctest --no-tests=error -R ...)\n";
    return 1;
  }
  std::cout << "[ oomguard ] OOMGUARD_ACCEPT=" << accept << ": " << recorded
            << " budget(s) recorded in " << (path.empty() ? "(no OOMGUARD_BUDGETS)" : path)
            << (recorded == 0 ? ": no test checked a phase against the budgets file "
                                "(EXPECT_PHASE_WITHIN_BUDGET)"
                              : "")
            << "\n";
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (const auto settings = settings_to_start_again_with(); !settings.empty())
      oomguard::memory::start_again(argv, settings);
    oomguard::memory::install_meter(oomguard::memory::meter_options_from_env());
    oomguard::testing::test_threads();  // a bad OOMGUARD_THREADS stops the binary here
  } catch (const std::exception& e) {
    std::cerr << "oomguard: " << e.what() << "\n";
    return 2;
  }
  ::testing::InitGoogleTest(&argc, argv);
  // As the binary was started: a test may change its own environment.
  const auto env = [](const char* name) {
    const char* value = std::getenv(name);
    return std::string(value != nullptr ? value : "");
  };
  const std::string budgets = env("OOMGUARD_BUDGETS"), accept = env("OOMGUARD_ACCEPT");
  const bool accepting = oomguard::testing::detail::accepting();
  const int result = RUN_ALL_TESTS();
#ifdef GTEST_FLAG_GET
  const bool listing = GTEST_FLAG_GET(list_tests);
#else
  const bool listing = ::testing::GTEST_FLAG(list_tests);
#endif
  if (listing)
    return result;  // gtest_discover_tests reads this output: nothing of ours in it
  check_stale_budgets(budgets, accept);
  return accepting ? report_accepted(result, budgets, accept) : result;
}
