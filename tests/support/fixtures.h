#pragma once
// Shared fixtures: seeding, and the phase-by-phase budget run.
#include <gtest/gtest.h>

#include "harness/memory/tracking_allocator.h"
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
  memory::TrackingAllocator& meter() { return memory::TrackingAllocator::instance(); }
};

// A config small enough for unit tests, built from the default with overrides.
run::RunConfig small_config(const nlohmann::json& extra = nlohmann::json::object());

}  // namespace oomguard::testing
