// harness/phases + run: the phases in order, each peak asserted right after its phase.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include <c10/util/Exception.h>

#include "data/tokenizer.h"
#include "harness/interrupt.h"
#include <oomguard/memory/alloc_site.h>
#include <oomguard/memory/sizes.h>
#include <oomguard/memory/tracking_allocator.h>
#include <oomguard/gtest.h>
#include "tests/support/fixtures.h"

namespace oomguard::run {
namespace {

class PhaseBudgetTest : public testing::TrackedFixture {
 protected:
  // Runs `config`, asserting each phase against its budget as soon as it ends.
  RunReport run_checked(const RunConfig& config, uint64_t seed) {
    RunOptions options;
    options.seed = seed;
    // Each phase through oomguard's GoogleTest layer, as a user's test would assert it.
    options.on_phase = [](const PhaseReport& p) {
      const testing::PhaseResult phase = testing::phase_result(p.memory);
      std::printf(
          "[mem] phase=%s peak=%s budget=%s\n",
          phase.name.c_str(),
          memory::format_size(phase.peak_allocated_bytes).c_str(),
          memory::format_size(p.budget_bytes).c_str());
      EXPECT_PHASE_PEAK_BELOW(phase, memory::format_size(p.budget_bytes));
      EXPECT_GT(phase.growth_bytes(), 0);
    };
    return smoke_run(config, testing::meters().meter(), options);
  }
};

// The memory fixture: under `ctest --repeat until-fail:N` each repeat takes the next seed.
TEST_F(PhaseBudgetTest, DefaultConfigStaysWithinEveryBudget) {
  const uint64_t seed = testing::seed_test();
  nlohmann::json doc = nlohmann::json::object();
  testing::disable_guards_from_env(doc);
  std::printf(
      "seed %llu (OOMGUARD_SEED=%llu reruns it)\n",
      (unsigned long long)seed,
      (unsigned long long)seed);
  const RunReport report = run_checked(load_config(doc), seed);
  ASSERT_EQ(report.phases.size(), 3u);
  EXPECT_EQ(report.outcome, memory::PhaseStatus::kPass);
}

TEST_F(PhaseBudgetTest, TightBudgetIsReportedAsExceeded) {
  RunConfig config = testing::small_config({{"budget", {{"evaluate", "1KiB"}}}});
  const RunReport report = smoke_run(config, meter(), RunOptions{});
  ASSERT_EQ(report.phases.size(), 3u);
  EXPECT_EQ(report.phases[1].status, memory::PhaseStatus::kBudgetExceeded);
  EXPECT_EQ(report.outcome, memory::PhaseStatus::kBudgetExceeded);
}

TEST_F(PhaseBudgetTest, EmulatedOomIsCaughtWithItsPhase) {
  const RunConfig config = testing::small_config();
  // Room for the model and a little more, not for a train step's activations.
  meter().set_capacity(meter().stats().allocated_bytes + (1 << 20));
  const RunReport report = smoke_run(config, meter(), RunOptions{});
  meter().set_capacity(0);
  EXPECT_EQ(report.outcome, memory::PhaseStatus::kOom);
  ASSERT_TRUE(report.oom.has_value());
  EXPECT_EQ(report.oom->phase, "train");
  EXPECT_GT(report.oom->requested_bytes, 0);
  EXPECT_NE(report.oom->message.find("out of memory"), std::string::npos);
}

// Raises `message` at the first allocation of the train phase (memory::alloc_site), as a
// failed kernel's error surfaces at LibTorch's next CUDA call.
class FailInTraining final : public memory::AllocationObserver {
 public:
  explicit FailInTraining(std::string message) : message_(std::move(message)) {}
  void on_alloc(int64_t, int64_t) override {
    if (std::strcmp(memory::alloc_site().phase, "train") == 0 && !failed_.exchange(true))
      TORCH_CHECK(false, message_);
  }
  void on_free(int64_t) override {}

 private:
  std::string message_;
  std::atomic<bool> failed_{false};
};

// The process's tracker holds `observer` while this lives (a failed assertion returns early).
class ObserverAdded {
 public:
  explicit ObserverAdded(memory::AllocationObserver& observer) : observer_(observer) {
    memory::TrackingAllocator::instance().add_observer(&observer_);
  }
  ~ObserverAdded() { memory::TrackingAllocator::instance().remove_observer(&observer_); }
  ObserverAdded(const ObserverAdded&) = delete;
  ObserverAdded& operator=(const ObserverAdded&) = delete;

 private:
  memory::AllocationObserver& observer_;
};

// A device's own error inside a phase (C10_CUDA_CHECK's "CUDA error: ...") ends the run there,
// and the report says which phase and what (outcome device_error: exit code 5); any other
// LibTorch error is a bug, and propagates.
TEST_F(PhaseBudgetTest, ADeviceErrorEndsTheRunWithItsPhase) {
  const RunConfig config = testing::small_config();
  for (const bool device : {true, false}) {
    FailInTraining fail(
        device ? "CUDA error: an illegal memory access was encountered"
               : "mat1 and mat2 shapes cannot be multiplied");
    const ObserverAdded added(fail);
    if (device) {
      const RunReport report = smoke_run(config, meter(), RunOptions{});
      EXPECT_EQ(report.outcome, memory::PhaseStatus::kDeviceError);
      EXPECT_EQ(report.phases.size(), 1u) << "the run goes on after the device failed";
      ASSERT_TRUE(report.device_error.has_value());
      EXPECT_EQ(report.device_error->phase, "train");
      EXPECT_NE(report.device_error->message.find("illegal memory access"), std::string::npos);
      EXPECT_FALSE(report.oom.has_value());
      const report::RunRecord record = to_record(report);
      ASSERT_TRUE(record.device_error.has_value());
      EXPECT_EQ(record.device_error->phase, "train");
    } else {
      EXPECT_THROW(smoke_run(config, meter(), RunOptions{}), c10::Error);
    }
  }
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

// Checkpointing replays the dropout masks: the losses agree step by step.
TEST_F(PhaseBudgetTest, CheckpointedTrainingLosesWhatPlainTrainingLoses) {
  const nlohmann::json steps = {{"train", {{"steps", 6}}}};
  nlohmann::json plain = steps;
  plain["guards"] = {{"grad_checkpoint", false}};
  const auto a = smoke_run(testing::small_config(steps), meter(), RunOptions{});
  const auto b = smoke_run(testing::small_config(plain), meter(), RunOptions{});
  const auto& la = a.phases[0].results["losses"];
  const auto& lb = b.phases[0].results["losses"];
  ASSERT_EQ(la.size(), 6u);
  ASSERT_EQ(lb.size(), 6u);
  for (size_t i = 0; i < la.size(); ++i)
    EXPECT_NEAR(la[i].get<double>(), lb[i].get<double>(), 1e-5 * lb[i].get<double>()) << i;
}

// The static cache, the grow cache and full recomputation decode the same greedy tokens.
TEST_F(PhaseBudgetTest, EveryCacheModeDecodesTheSameTokens) {
  const nlohmann::json generate = {{"generate", {{"max_new_tokens", 24}}}};
  nlohmann::json none = generate, grow = generate;
  none["generate"]["cache"] = "none";
  grow["guards"] = {{"kv_cap", false}};
  const auto tokens = [&](const nlohmann::json& doc) {
    return smoke_run(testing::small_config(doc), meter(), RunOptions{})
        .phases[2]
        .results["sample_tokens"];
  };
  const auto reference = tokens(none);
  EXPECT_EQ(reference.size(), 24u);
  EXPECT_EQ(tokens(generate), reference);
  EXPECT_EQ(tokens(grow), reference);
}

// The same seed and thread count give bitwise-identical losses and identical peaks; another
// seed gives other data, so other losses.
TEST_F(PhaseBudgetTest, SameSeedRepeatsBitwise) {
  const RunConfig config = testing::small_config({{"train", {{"steps", 5}}}});
  RunOptions options;
  options.seed = 3;
  const RunReport reference = smoke_run(config, meter(), options);
  ASSERT_EQ(reference.outcome, memory::PhaseStatus::kPass);
  for (int repeat = 0; repeat < 5; ++repeat) {
    const RunReport again = smoke_run(config, meter(), options);
    ASSERT_EQ(again.phases.size(), reference.phases.size());
    EXPECT_EQ(again.phases[0].results["losses"], reference.phases[0].results["losses"]) << repeat;
    for (size_t i = 0; i < again.phases.size(); ++i)
      EXPECT_EQ(
          again.phases[i].memory.peak_allocated_bytes,
          reference.phases[i].memory.peak_allocated_bytes)
          << again.phases[i].memory.name << ", repeat " << repeat;
  }
  options.seed = 4;
  EXPECT_NE(
      smoke_run(config, meter(), options).phases[0].results["losses"],
      reference.phases[0].results["losses"]);
}

// In the spirit of PyTorch's leak check: each phase gives back what it allocated, except what
// it legitimately keeps (train: AdamW's two moments per parameter and, fused, a float step
// count per parameter), and a run leaves nothing.
TEST_F(PhaseBudgetTest, PhasesGiveBackWhatTheyAllocate) {
  const RunConfig config = testing::small_config();
  models::TinyGPTConfig model_config = config.model;
  model_config.vocab_size = data::kVocabSize;
  int64_t param_bytes = 0, params = 0;
  for (const auto& p : models::TinyGPT(model_config)->parameters()) {
    param_bytes += static_cast<int64_t>(p.nbytes());
    ++params;
  }
  const int64_t before = meter().stats().allocated_bytes;
  for (int run = 0; run < 3; ++run) {
    const RunReport report = smoke_run(config, meter(), RunOptions{});
    ASSERT_EQ(report.phases.size(), 3u);
    const auto kept = [&](size_t i) {
      return report.phases[i].memory.end_allocated_bytes -
             report.phases[i].memory.start_allocated_bytes;
    };
    EXPECT_EQ(kept(0), 2 * param_bytes + params * int64_t{sizeof(float)})
        << "train keeps exp_avg, exp_avg_sq and the step counts only";
    EXPECT_EQ(kept(1), 0) << "evaluate";
    EXPECT_EQ(kept(2), 0) << "generate";
    EXPECT_EQ(meter().stats().allocated_bytes, before) << "after run " << run;
  }
}

TEST_F(PhaseBudgetTest, InterruptionEndsTheRunInItsPhase) {
  request_interrupt();  // as SIGINT or SIGTERM would
  const RunReport report = smoke_run(testing::small_config(), meter(), RunOptions{});
  clear_interrupt();
  EXPECT_EQ(report.outcome, memory::PhaseStatus::kInterrupted);
  ASSERT_EQ(report.phases.size(), 1u);
  EXPECT_EQ(report.phases[0].status, memory::PhaseStatus::kInterrupted);
  EXPECT_EQ(
      report.phases[0].memory.end_allocated_bytes, report.phases[0].memory.start_allocated_bytes);
}

}  // namespace
}  // namespace oomguard::run
