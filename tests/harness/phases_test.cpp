// harness/phases + run: the phases in order, each peak asserted right after its phase.
#include <gtest/gtest.h>

#include <cstdio>

#include "harness/memory/sizes.h"
#include "tests/support/fixtures.h"

namespace oomguard::run {
namespace {

class PhaseBudgetTest : public testing::TrackedFixture {
 protected:
  // Runs `config`, asserting each phase against its budget as soon as it ends.
  RunReport run_checked(const RunConfig& config, uint64_t seed) {
    RunOptions options;
    options.seed = seed;
    options.on_phase = [](const PhaseReport& p) {
      std::printf(
          "[mem] phase=%s peak=%s budget=%s\n",
          p.memory.name.c_str(),
          memory::format_size(p.memory.peak_allocated_bytes).c_str(),
          memory::format_size(p.budget_bytes).c_str());
      EXPECT_LE(p.memory.peak_allocated_bytes, p.budget_bytes) << "phase " << p.memory.name;
      EXPECT_GT(p.memory.peak_allocated_bytes, p.memory.start_allocated_bytes);
    };
    return smoke_run(config, meter(), options);
  }
};

// The memory fixture: under `ctest --repeat until-fail:N` each repeat takes the next seed.
TEST_F(PhaseBudgetTest, DefaultConfigStaysWithinEveryBudget) {
  const uint64_t seed = testing::next_seed();
  nlohmann::json doc = nlohmann::json::object();
  testing::disable_guards_from_env(doc);
  std::printf(
      "seed %llu (OOMGUARD_SEED=%llu reruns it)\n",
      (unsigned long long)seed,
      (unsigned long long)seed);
  const RunReport report = run_checked(load_config(doc), seed);
  ASSERT_EQ(report.phases.size(), 3u);
  EXPECT_EQ(report.outcome, "pass");
}

TEST_F(PhaseBudgetTest, TightBudgetIsReportedAsExceeded) {
  RunConfig config = testing::small_config({{"budget", {{"evaluate", "1KiB"}}}});
  const RunReport report = smoke_run(config, meter(), RunOptions{});
  ASSERT_EQ(report.phases.size(), 3u);
  EXPECT_EQ(report.phases[1].status, "budget_exceeded");
  EXPECT_EQ(report.outcome, "budget_exceeded");
}

TEST_F(PhaseBudgetTest, EmulatedOomIsCaughtWithItsPhase) {
  const RunConfig config = testing::small_config();
  // Room for the model and a little more, not for a train step's activations.
  meter().set_capacity(meter().stats().allocated_bytes + (1 << 20));
  const RunReport report = smoke_run(config, meter(), RunOptions{});
  meter().set_capacity(0);
  EXPECT_EQ(report.outcome, "oom");
  ASSERT_TRUE(report.oom.has_value());
  EXPECT_EQ(report.oom->phase, "train");
  EXPECT_GT(report.oom->requested_bytes, 0);
  EXPECT_NE(report.oom->message.find("out of memory"), std::string::npos);
}

TEST_F(PhaseBudgetTest, SmokeLossFallsAndGreedyGenerationRepeats) {
  const RunConfig config = testing::small_config({{"train", {{"steps", 40}}}});
  const RunReport a = smoke_run(config, meter(), RunOptions{});
  const RunReport b = smoke_run(config, meter(), RunOptions{});
  const auto& losses = a.phases[0].results["losses"];
  const double first = losses[0].get<double>(), last = losses.back().get<double>();
  EXPECT_LT(last, 0.7 * first) << "first " << first << ", last " << last;
  EXPECT_EQ(a.phases[2].results["sample_tokens"], b.phases[2].results["sample_tokens"]);
  EXPECT_EQ(a.phases[2].results["sample_tokens"].size(), 8u);
}

}  // namespace
}  // namespace oomguard::run
