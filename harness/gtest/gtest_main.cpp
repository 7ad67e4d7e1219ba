// main of oomguard::gtest_main. The CPU tracking allocator is installed before this binary's
// own static initializers run (harness/memory/tracking_allocator.cpp), so a model built in a
// static or a test suite's SetUp is counted. Here, before any test: the CUDA caching
// allocator's settings (OOMGUARD_ALLOC_CONF) go into LibTorch's variable, starting the
// process again when they were not there yet, and the meter stack is built from the
// environment, so a bad OOMGUARD_* variable stops the binary with exit code 2 and a message.
#include <cstdlib>
#include <iostream>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>
#include <torch/version.h>

#include <oomguard/gtest.h>
#include <oomguard/memory/meter_stack.h>
#include <oomguard/sim/alloc_conf.h>
#include "harness/gtest/registry.h"
#include "harness/memory/start_again.h"

namespace {

// The caching allocator reads its settings from the environment once, possibly when LibTorch
// loads: a binary asked for other settings starts again with them (execv does not return).
void apply_alloc_conf(char** argv) {
  const char* wanted = std::getenv("OOMGUARD_ALLOC_CONF");
  if (wanted == nullptr || *wanted == '\0')
    return;
  const oomguard::sim::TorchVersion torch{TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR};
  try {
    oomguard::sim::validate_alloc_conf(wanted, torch);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("OOMGUARD_ALLOC_CONF: ") + e.what());
  }
  for (const char* variable : oomguard::sim::alloc_conf_variables(torch)) {
    const char* current = std::getenv(variable);
    if (current == nullptr || std::string(current) != wanted)
      oomguard::memory::start_again_with_alloc_conf(wanted, argv);
  }
}

// With OOMGUARD_ACCEPT=1: says what was recorded, and fails when no test ran at all (a filter
// that matched nothing would otherwise look like budgets recorded).
int report_accepted(int result) {
  const char* path = std::getenv("OOMGUARD_BUDGETS");
  const int recorded = oomguard::testing::detail::budgets_recorded();
  if (::testing::UnitTest::GetInstance()->test_to_run_count() == 0) {
    std::cerr << "oomguard: OOMGUARD_ACCEPT=1, but no test ran, so no budget was recorded; "
                 "check --gtest_filter (under ctest, ctest --no-tests=error -R ...)\n";
    return 1;
  }
  std::cout << "[ oomguard ] OOMGUARD_ACCEPT=1: " << recorded << " budget(s) recorded in "
            << (path != nullptr ? path : "(no OOMGUARD_BUDGETS)")
            << (recorded == 0 ? ": no test checked a phase against the budgets file "
                                "(EXPECT_PHASE_WITHIN_BUDGET)"
                              : "")
            << "\n";
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    apply_alloc_conf(argv);
    oomguard::memory::install_meter(oomguard::memory::meter_options_from_env());
    oomguard::testing::test_threads();  // a bad OOMGUARD_THREADS stops the binary here
  } catch (const std::exception& e) {
    std::cerr << "oomguard: " << e.what() << "\n";
    return 2;
  }
  ::testing::InitGoogleTest(&argc, argv);
  const int result = RUN_ALL_TESTS();
  return oomguard::testing::detail::accepting() ? report_accepted(result) : result;
}
