// The GoogleTest layer (<oomguard/gtest.h>) as a user's test binary sees it: linked with
// oomguard::gtest_main alone. The assertions' bodies are called directly where a test needs
// their failure message; measure()'s own failures are caught with a fake reporter.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <ATen/ops/empty.h>
#include <ATen/ops/ones.h>
#include <c10/core/CPUAllocator.h>
#include <gtest/gtest-spi.h>

#include <oomguard/gtest.h>
#include <oomguard/memory/alloc_site.h>
#include <oomguard/memory/budgets.h>
#include <oomguard/memory/cards.h>
#include <oomguard/memory/sizes.h>
#include <oomguard/sim/alloc_conf.h>
#include <torch/version.h>

namespace oomguard::testing {
namespace {

constexpr int64_t kMiB = 1 << 20;

// Allocated while the binary starts, by a default-priority static initializer: the meter is
// there before it (gtest_main and the tracker's own start-up install), so it is counted.
const at::Tensor g_static_tensor = at::ones({kMiB / 4}, at::kFloat);  // 1 MiB

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A scratch directory per test, removed afterwards.
class LayerTest : public MemoryTest {
 protected:
  void SetUp() override {
    MemoryTest::SetUp();
    dir_ = std::filesystem::temp_directory_path() /
           ("oomguard_layer_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    std::filesystem::remove_all(dir_);
    ::unsetenv("OOMGUARD_BUDGETS");
    ::unsetenv("OOMGUARD_ACCEPT");
  }
  std::filesystem::path dir_;
};

PhaseResult allocate_phase(const std::string& name, int64_t bytes) {
  return measure(name, [bytes] {
    memory::AllocTag tag("activations");
    const at::Tensor t = at::empty({bytes}, at::kByte);
  });
}

// Two phases for `oomguard compare` (tests/cli/compare_check.sh): with
// OOMGUARD_LAYER_TEST_KEEP_LOGITS=1 evaluate keeps every batch's logits in a list, the
// regression a base-vs-head comparison must name by test, phase and tag.
TEST_F(LayerTest, TrainThenEvaluateForCompare) {
  const bool keep = std::getenv("OOMGUARD_LAYER_TEST_KEEP_LOGITS") != nullptr;
  measure("train", [] {
    memory::AllocTag tag("activations");
    const at::Tensor t = at::empty({4 * kMiB}, at::kByte);
  });
  std::vector<at::Tensor> kept;
  measure("evaluate", [&] {
    for (int batch = 0; batch < 4; ++batch) {
      memory::AllocTag tag("logits");
      const at::Tensor logits = at::empty({kMiB}, at::kByte);
      if (keep)
        kept.push_back(logits);
    }
  });
}

// measure_steps() and EXPECT_PHASE_NO_STEP_GROWTH: a loop that keeps 196 KiB of every step
// (fake images kept without .detach()) fails naming the phase and the growth per step; a loop
// whose first step creates state it keeps (an optimizer's) passes.
TEST_F(LayerTest, AStepThatKeepsWhatItMadeFailsTheStepGrowthCheck) {
  constexpr int64_t kKept = 196 * 1024;
  std::vector<at::Tensor> kept;
  const PhaseResult leaking = measure_steps("train", 5, [&](int) {
    memory::AllocTag tag("fake_images");
    kept.push_back(at::empty({kKept}, at::kByte));
    const at::Tensor scratch = at::empty({kMiB}, at::kByte);
  });
  ASSERT_EQ(leaking.step_end_bytes.size(), 5u);
  EXPECT_EQ(leaking.step_end_bytes[4] - leaking.step_end_bytes[0], 4 * kKept);
  const auto verdict = phase_no_step_growth("leaking", "\"16KiB\"", leaking, "16KiB");
  ASSERT_FALSE(verdict);
  EXPECT_TRUE(contains(
      verdict.message(),
      "phase train of LayerTest.AStepThatKeepsWhatItMadeFailsTheStepGrowthCheck keeps 196KiB "
      "more after each step (the median), over the tolerance 16KiB (after step 1: +196KiB, 2: "
      "+196KiB, 3: +196KiB, 4: +196KiB;"))
      << verdict.message();
  kept.clear();

  // State made by the first step, and something made once later (a lazily built buffer).
  at::Tensor state, later;
  const PhaseResult steady = measure_steps("train_steady", 5, [&](int step) {
    if (step == 0)
      state = at::empty({kMiB}, at::kByte);
    if (step == 2)
      later = at::empty({kMiB}, at::kByte);
    const at::Tensor scratch = at::empty({kMiB}, at::kByte);
  });
  EXPECT_PHASE_NO_STEP_GROWTH(steady, "16KiB");
  const PhaseResult one = measure("once", [] {});
  EXPECT_TRUE(contains(
      phase_no_step_growth("one", "\"16KiB\"", one, "16KiB").message(),
      "give it to measure_steps() with 2 steps or more"));
}

// Without a single AllocTag, what was live at the peak is named by the operator that made it
// (a RecordFunction callback): in the forward by its aten operator, in the backward by the
// autograd node.
TEST_F(LayerTest, UntaggedAllocationsAreNamedByTheirOperator) {
  const at::Tensor w = at::ones({512, 512}).requires_grad_();  // 1 MiB
  const auto tags = [](const PhaseResult& phase) {
    std::string all;
    for (const auto& t : phase.live_at_peak)
      all += t.tag + "; ";
    return all;
  };
  at::Tensor loss;
  const PhaseResult forward = measure("forward", [&] {
    const at::Tensor x = at::ones({1024, 512});  // 2 MiB
    loss = at::matmul(x, w).relu().sum();        // keeps x and the relu's output for backward
  });
  EXPECT_TRUE(contains(tags(forward), "untagged: aten::ones")) << tags(forward);
  EXPECT_TRUE(contains(tags(forward), "untagged: aten::relu")) << tags(forward);
  EXPECT_FALSE(contains(tags(forward), "(untagged)")) << tags(forward);
  const PhaseResult backward = measure("backward", [&] { loss.backward(); });
  EXPECT_TRUE(contains(tags(backward), "Backward")) << tags(backward);
  EXPECT_FALSE(contains(tags(backward), "(untagged)")) << tags(backward);
}

TEST_F(LayerTest, StaticInitializersAreCounted) {
  ASSERT_EQ(meters().device(), "cpu") << "this binary's tests are for the CPU meter";
  EXPECT_GE(meters().meter().stats().allocated_bytes, kMiB)
      << "the 1 MiB tensor made before main is not counted: the meter came too late";
  EXPECT_EQ(c10::GetCPUAllocator(), &meters().tracker());
}

TEST_F(LayerTest, MeasureReportsStartPeakAndEnd) {
  const PhaseResult phase = allocate_phase("scratch", 4 * kMiB);
  EXPECT_EQ(phase.name, "scratch");
  EXPECT_EQ(phase.test, "LayerTest.MeasureReportsStartPeakAndEnd");
  EXPECT_EQ(phase.meter, "cpu");
  EXPECT_GE(phase.peak_allocated_bytes - phase.start_allocated_bytes, 4 * kMiB);
  EXPECT_EQ(phase.end_allocated_bytes, phase.start_allocated_bytes);
  EXPECT_EQ(phase.peak_reserved_bytes, -1);
  EXPECT_TRUE(phase.oom.empty());
  EXPECT_TRUE(phase.untracked.empty()) << phase.untracked;
  ASSERT_FALSE(phase.live_at_peak.empty());
  EXPECT_EQ(phase.live_at_peak.front().tag, "activations");
  EXPECT_GE(phase.live_at_peak.front().bytes, 4 * kMiB);
}

TEST_F(LayerTest, PeakOverItsLimitFailsWithThePhaseAndWhatWasLive) {
  const PhaseResult phase = allocate_phase("evaluate", 4 * kMiB);
  EXPECT_PHASE_PEAK_BELOW(phase, "8MiB");
  const ::testing::AssertionResult over = phase_peak_below("phase", "\"2MiB\"", phase, "2MiB");
  ASSERT_FALSE(over);
  const std::string message = over.message();
  EXPECT_TRUE(contains(
      message,
      "phase evaluate of LayerTest.PeakOverItsLimitFailsWithThePhaseAndWhatWasLive peaked at "))
      << message;
  EXPECT_TRUE(contains(message, ", over its budget 2MiB (started at ")) << message;
  const ::testing::AssertionResult bad = phase_peak_below("phase", "\"38XB\"", phase, "38XB");
  ASSERT_FALSE(bad);
  EXPECT_TRUE(contains(bad.message(), "the limit \"38XB\": ")) << bad.message();
  EXPECT_TRUE(contains(message, "live at the peak, by tag:\n          4MiB  activations"))
      << message;
}

TEST_F(LayerTest, GrowthAndNearOomAssertions) {
  const PhaseResult phase = allocate_phase("grow", 3 * kMiB);
  EXPECT_PHASE_GROWTH_BELOW(phase, "4MiB");
  EXPECT_PHASE_NO_NEAR_OOM(phase);
  const ::testing::AssertionResult grew = phase_growth_below("phase", "\"1MiB\"", phase, "1MiB");
  ASSERT_FALSE(grew);
  EXPECT_TRUE(
      contains(grew.message(), "phase grow of LayerTest.GrowthAndNearOomAssertions grew by 3MiB"))
      << grew.message();
  PhaseResult retried = phase;
  retried.num_alloc_retries = 2;
  const ::testing::AssertionResult near = phase_no_near_oom("phase", retried);
  ASSERT_FALSE(near);
  EXPECT_TRUE(contains(near.message(), "retried 2 time(s)")) << near.message();
}

TEST_F(LayerTest, BudgetsAreDataAcceptedThenChecked) {
  const std::string budgets = (dir_ / "budgets.json").string();
  const PhaseResult phase = allocate_phase("evaluate", 2 * kMiB);

  const ::testing::AssertionResult no_file = phase_within_budget("phase", phase);
  ASSERT_FALSE(no_file);
  EXPECT_TRUE(contains(no_file.message(), "set OOMGUARD_BUDGETS")) << no_file.message();

  ::setenv("OOMGUARD_BUDGETS", budgets.c_str(), 1);
  const ::testing::AssertionResult missing = phase_within_budget("phase", phase);
  ASSERT_FALSE(missing);
  EXPECT_TRUE(contains(missing.message(), "has no budget for cpu in " + budgets))
      << missing.message();
  EXPECT_TRUE(contains(missing.message(), "OOMGUARD_ACCEPT=1")) << missing.message();

  ::setenv("OOMGUARD_ACCEPT", "1", 1);
  EXPECT_PHASE_WITHIN_BUDGET(phase);
  ::unsetenv("OOMGUARD_ACCEPT");
  const memory::BudgetFile file = memory::load_budgets(budgets);
  const auto budget = file.find({phase.test, "evaluate", "cpu", ""});
  ASSERT_TRUE(budget.has_value());
  EXPECT_EQ(*budget, memory::accepted_budget(phase.peak_allocated_bytes, 0.10));
  EXPECT_PHASE_WITHIN_BUDGET(phase);

  // The same phase with a bigger peak is over the recorded budget.
  const PhaseResult bigger = allocate_phase("evaluate", 4 * kMiB);
  const ::testing::AssertionResult over = phase_within_budget("bigger", bigger);
  ASSERT_FALSE(over);
  EXPECT_TRUE(contains(over.message(), ", over its budget " + memory::format_size(*budget)))
      << over.message();
}

TEST_F(LayerTest, OutOfMemoryFailsTheTestNamingThePhase) {
  memory::Meter& meter = meters().meter();
  meter.set_capacity(meter.stats().allocated_bytes + kMiB);
  PhaseResult phase;
  ::testing::TestPartResultArray failures;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
    phase = allocate_phase("generate", 4 * kMiB);
  }
  meter.set_capacity(0);
  EXPECT_FALSE(phase.oom.empty());
  ASSERT_EQ(failures.size(), 1);
  EXPECT_TRUE(contains(
      failures.GetTestPartResult(0).message(),
      "phase generate of LayerTest.OutOfMemoryFailsTheTestNamingThePhase ran out of memory: "))
      << failures.GetTestPartResult(0).message();
  // Reported at the test, not inside oomguard.
  const char* file = failures.GetTestPartResult(0).file_name();
  EXPECT_TRUE(file != nullptr && contains(file, "layer_test.cpp")) << (file ? file : "(none)");
  EXPECT_FALSE(phase_peak_below("phase", "\"1GiB\"", phase, "1GiB"));
}

// An allocator that hides what is allocated from the tracker.
class HidingAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    return c10::GetDefaultCPUAllocator()->allocate(nbytes);
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

TEST_F(LayerTest, FiguresTheMeterCannotSeeAreFlagged) {
  static HidingAllocator hiding;  // lives as long as tensors it handed out may
  c10::SetCPUAllocator(&hiding, /*priority=*/200);
  PhaseResult phase;
  ::testing::TestPartResultArray failures;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
    phase = allocate_phase("evaluate", 4 * kMiB);
  }
  c10::SetCPUAllocator(&meters().tracker(), /*priority=*/200);
  EXPECT_LT(phase.peak_allocated_bytes - phase.start_allocated_bytes, 4 * kMiB);
  EXPECT_TRUE(contains(phase.untracked, "no longer oomguard's tracking allocator"))
      << phase.untracked;
  ASSERT_EQ(failures.size(), 1);
  EXPECT_TRUE(contains(failures.GetTestPartResult(0).message(), "its figures may be low"));
  const ::testing::AssertionResult verdict = phase_peak_below("phase", "\"1GiB\"", phase, "1GiB");
  EXPECT_FALSE(verdict) << "low figures passed an assertion";
}

TEST_F(LayerTest, SeedsCountUpPerTest) {
  const char* fixed = std::getenv("OOMGUARD_SEED");
  if (fixed != nullptr)
    GTEST_SKIP() << "OOMGUARD_SEED is set";
  const uint64_t first = seed_test();
  const uint64_t second = seed_test();
  EXPECT_EQ(second, first + 1);
}

// Run by layer_check.sh with OOMGUARD_ALLOC_CONF set: gtest_main put it into LibTorch's
// variables (starting the binary again) before any test.
TEST_F(LayerTest, AllocConfReachesLibTorchsVariable) {
  const char* wanted = std::getenv("OOMGUARD_ALLOC_CONF");
  if (wanted == nullptr)
    GTEST_SKIP() << "OOMGUARD_ALLOC_CONF is not set";
  // Every variable this LibTorch reads (2.9's CUDA allocator reads only the older one).
  for (const char* variable :
       sim::alloc_conf_variables({TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR})) {
    const char* seen = std::getenv(variable);
    ASSERT_NE(seen, nullptr) << variable << " is not set";
    EXPECT_STREQ(seen, wanted) << variable;
  }
}

// Run by layer_check.sh with OOMGUARD_CARD set: the meter holds the card's capacity.
TEST_F(LayerTest, EmulatedCardFromTheEnvironment) {
  const char* card = std::getenv("OOMGUARD_CARD");
  if (card == nullptr)
    GTEST_SKIP() << "OOMGUARD_CARD is not set";
  const PhaseResult phase = allocate_phase("train", kMiB);
  EXPECT_EQ(phase.card, card);
  EXPECT_EQ(phase.capacity_bytes, memory::find_card(card).capacity_bytes());
  if (meters().modelled() != nullptr) {  // the model holds the card, as the CUDA allocator
    EXPECT_EQ(meters().tracker().capacity(), 0);
    ASSERT_EQ(phase.predictions.size(), 1u);
    EXPECT_EQ(phase.predictions[0].capacity_bytes, phase.capacity_bytes);
    EXPECT_EQ(phase.predictions[0].card, card);
  } else {  // OOMGUARD_ALLOCATOR_MODEL=none: the CPU bytes are held to it
    EXPECT_EQ(meters().tracker().capacity(), phase.capacity_bytes);
    EXPECT_TRUE(phase.predictions.empty());
  }
}

}  // namespace
}  // namespace oomguard::testing
