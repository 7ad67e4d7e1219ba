#pragma once
// Shared fixtures: seeding, and the phase-by-phase budget run.
#include <gtest/gtest.h>

#include <oomguard/gtest.h>
#include <oomguard/memory/tracking_allocator.h>
#include "harness/run/smoke_run.h"

namespace oomguard::testing {

// Seeds LibTorch and pins the thread count, so every test starts from the same state.
class SeedingFixture : public ::testing::Test {
 protected:
  void SetUp() override;
};

// The tracking meter, installed; the emulated capacity is cleared around each test.
class TrackedFixture : public SeedingFixture {
 protected:
  void SetUp() override;
  void TearDown() override;
  // The CPU tracker of the GoogleTest layer's meter stack (<oomguard/gtest.h>).
  memory::TrackingAllocator& meter() { return meters().tracker(); }
};

// A TinyGPT small enough for unit tests: d_model 32, 2 layers, 4 heads, 64 positions,
// dropout 0.1.
models::TinyGPTConfig small_model_config();

// A config small enough for unit tests, built from the default with overrides.
run::RunConfig small_config(const nlohmann::json& extra = nlohmann::json::object());

// Whether the tests slow by nature run (OOMGUARD_SLOW=1, as ci/run-tests.sh sets it;
// tests/support/slow.sh): such a test skips itself otherwise, saying so.
bool slow_tests_on();
#define OOMGUARD_SKIP_UNLESS_SLOW()          \
  if (!::oomguard::testing::slow_tests_on()) \
  GTEST_SKIP() << "slow test, skipped: OOMGUARD_SLOW=1 runs it (ci/run-tests.sh sets it)"

// The guards named in $OOMGUARD_DISABLE_GUARD (comma-separated, or "all") switched off in
// `doc`, so the fixture can be repeated with a bug put back in.
void disable_guards_from_env(nlohmann::json& doc);

}  // namespace oomguard::testing
