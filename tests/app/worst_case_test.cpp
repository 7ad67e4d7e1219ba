// harness/app/worst_case: the worst inputs of each phase, from the samples' lengths. The
// evaluation's claim (no order of one epoch does better) is checked against every order of
// small data sets.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "harness/app/worst_case.h"

namespace oomguard::app {
namespace {

WorstCaseData unguarded(std::vector<int64_t> lengths) {
  WorstCaseData d;
  d.lengths = std::move(lengths);
  d.synthetic = false;
  d.batch_size = 2;
  d.cut = 100;
  d.pad_to_longest = true;
  d.train_steps = 5;
  d.evaluate_batches = 3;
  d.prompts = 2;
  d.prompt_length = 4;
  d.cap_new_tokens = false;
  d.max_seq_len = 100;
  return d;
}

std::vector<int64_t> positions_of(const WorstCasePhase& phase) {
  std::vector<int64_t> out;
  for (const WorstCaseStep& s : phase.steps)
    out.push_back(s.positions);
  return out;
}

TEST(WorstCase, TrainRunsTwoStepsTheSecondHoldingTheLongestSample) {
  const WorstCasePlan plan = plan_worst_case(unguarded({10, 40, 20, 300, 5, 7}));
  const WorstCasePhase& train = plan.phases[0];
  ASSERT_EQ(train.steps.size(), 2u);
  EXPECT_EQ(plan.train_steps, 2);
  EXPECT_EQ(train.steps_configured, 5);
  // 300 bytes cut at the model's 100 positions.
  EXPECT_EQ(train.steps[1].positions, 100);
  EXPECT_NE(
      std::find(train.steps[1].samples.begin(), train.steps[1].samples.end(), 3u),
      train.steps[1].samples.end());
  EXPECT_LT(train.steps[0].positions, 100);
  // The seed's own draws with the longest swapped in: still one epoch's distinct samples.
  ASSERT_EQ(plan.train_order.size(), 4u);
  EXPECT_EQ(std::set<size_t>(plan.train_order.begin(), plan.train_order.end()).size(), 4u);
  // With the reserved peak searched: the seed's 5 batches, then the longest sample's.
  WorstCaseData every = unguarded({10, 40, 20, 300, 5, 7});
  every.every_train_step = true;
  const WorstCasePlan searched = plan_worst_case(every);
  ASSERT_EQ(searched.phases[0].steps.size(), 6u);
  EXPECT_EQ(searched.train_steps, 6);
  EXPECT_EQ(searched.train_steps_searched, 5);
  EXPECT_EQ(searched.phases[0].steps[5].positions, 100);
  const auto sets = worst_case_sets(searched);
  EXPECT_NE(std::find(sets.begin(), sets.end(), "train.steps=6"), sets.end());
}

// The synthetic corpus keeps the seed's orders: samples are drawn longest instead, the
// evaluation's from samples train does not draw where there are some, so that train keeps the
// seed's shapes.
TEST(WorstCase, TheSyntheticCorpusLengthensSamplesInTheSeedsOrder) {
  WorstCaseData d = unguarded(std::vector<int64_t>(40, 20));
  d.synthetic = true;
  d.longest_length = 90;
  const WorstCasePlan plan = plan_worst_case(d);
  EXPECT_TRUE(plan.train_order.empty());
  EXPECT_TRUE(plan.evaluate_order.empty());
  EXPECT_EQ(plan.phases[0].steps[1].positions, 90);
  for (const WorstCaseStep& s : plan.phases[1].steps)
    EXPECT_EQ(s.positions, 90);
  // Train's step 0, the generator's first samples aside, keeps the seed's shape.
  std::set<size_t> train_samples;
  for (const WorstCaseStep& s : plan.phases[0].steps)
    train_samples.insert(s.samples.begin(), s.samples.end());
  size_t lengthened_in_train = 0;
  for (const auto& [i, bytes] : plan.sample_lengths) {
    EXPECT_EQ(bytes, 90);
    EXPECT_EQ(plan.lengths[i], 90);
    lengthened_in_train += train_samples.count(i) > 0 && i >= 2 ? 1 : 0;
  }
  EXPECT_EQ(lengthened_in_train, 1u);  // train's own
  EXPECT_EQ(plan.phases[2].steps[0].samples, (std::vector<size_t>{0, 1}));
}

TEST(WorstCase, GuardedEveryBatchHasTheCutsPositions) {
  WorstCaseData d = unguarded({10, 40, 20, 300, 5, 7});
  d.pad_to_longest = false;
  d.cut = 16;
  const WorstCasePlan plan = plan_worst_case(d);
  for (const WorstCasePhase* phase : {&plan.phases[0], &plan.phases[1]})
    for (const WorstCaseStep& s : phase->steps)
      EXPECT_EQ(s.positions, 16) << phase->name;
}

TEST(WorstCase, EvaluationWithinOneEpochTakesEachSampleOnceTheLongestLast) {
  const WorstCasePlan plan = plan_worst_case(unguarded({10, 40, 20, 60, 5, 7, 30}));
  const WorstCasePhase& evaluate = plan.phases[1];
  EXPECT_TRUE(evaluate.attained);
  EXPECT_EQ(positions_of(evaluate), (std::vector<int64_t>{30, 40, 60}));
  std::set<size_t> seen(plan.evaluate_order.begin(), plan.evaluate_order.end());
  EXPECT_EQ(seen.size(), plan.evaluate_order.size()) << "a sample taken twice in one epoch";
}

// Every order of one epoch's samples, as the loader would batch them: no order gives the
// batches positions above the plan's, compared sorted (what the kept batches add up to) and
// at the last batch (whose transient comes on top).
TEST(WorstCase, NoOrderOfOneEpochBeatsTheEvaluationsPlan) {
  const std::vector<std::vector<int64_t>> cases = {
      {3, 9, 4, 9, 1, 2}, {5, 1, 7, 2, 8, 3}, {6, 6, 6, 1, 1, 1}, {1, 2, 3, 4, 5, 6}};
  for (const auto& lengths : cases) {
    const WorstCaseData d = unguarded(lengths);
    const WorstCasePlan plan = plan_worst_case(d);
    std::vector<int64_t> planned = positions_of(plan.phases[1]);
    std::vector<int64_t> planned_sorted = planned;
    std::sort(planned_sorted.begin(), planned_sorted.end());
    std::vector<size_t> order(lengths.size());
    std::iota(order.begin(), order.end(), size_t{0});
    do {
      std::vector<int64_t> got;
      for (int64_t k = 0; k < d.evaluate_batches; ++k)
        got.push_back(batch_positions(
            {order[static_cast<size_t>(2 * k)], order[static_cast<size_t>(2 * k + 1)]},
            d.lengths,
            d));
      EXPECT_LE(got.back(), planned.back());
      std::sort(got.begin(), got.end());
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_LE(got[i], planned_sorted[i])
            << "an order beats the plan, lengths[0] " << lengths[0];
    } while (std::next_permutation(order.begin(), order.end()));
  }
}

TEST(WorstCase, PastOneEpochEveryBatchHoldsALongestSampleAndSaysWhetherThatIsReached) {
  WorstCaseData d = unguarded({10, 40, 20});
  d.evaluate_batches = 4;  // 8 draws of 3 samples
  WorstCasePlan plan = plan_worst_case(d);
  EXPECT_EQ(positions_of(plan.phases[1]), (std::vector<int64_t>(4, 40)));
  EXPECT_FALSE(plan.phases[1].attained);
  d.lengths = {40, 40, 40};
  plan = plan_worst_case(d);
  EXPECT_TRUE(plan.phases[1].attained);
}

TEST(WorstCase, GenerateTakesTheFilesOwnPromptsAndRunsToTheLongestsEnd) {
  WorstCaseData d = unguarded({3, 50, 2, 20, 90});
  const WorstCasePlan plan = plan_worst_case(d);
  const WorstCasePhase& generate = plan.phases[2];
  ASSERT_EQ(generate.steps.size(), 1u);
  EXPECT_EQ(generate.steps[0].samples, (std::vector<size_t>{1, 3}));
  // 50 bytes and an end token, less the 4-token prompt.
  EXPECT_EQ(generate.steps_configured, 47);
  d.cap_new_tokens = true;
  d.max_new_tokens = 8;
  EXPECT_EQ(plan_worst_case(d).phases[2].steps_configured, 8);
}

TEST(WorstCase, ReproduceSetsNameTheOrdersOrTheLengthenedSamples) {
  WorstCaseData d = unguarded({10, 40, 20, 60, 5, 7, 30});
  WorstCasePlan plan = plan_worst_case(d);
  std::vector<std::string> sets = worst_case_sets(plan);
  ASSERT_EQ(sets.size(), 2u);
  EXPECT_EQ(sets[0].rfind("data.train_order=[", 0), 0u) << sets[0];
  EXPECT_EQ(sets[1].rfind("data.evaluate_order=[", 0), 0u) << sets[1];
  // Another order of the steps: their batches in that order.
  const std::vector<size_t> swapped = {1, 0};
  sets = worst_case_sets(plan, &swapped, nullptr);
  const auto& t = plan.phases[0].steps;
  std::vector<size_t> expected = t[1].samples;
  expected.insert(expected.end(), t[0].samples.begin(), t[0].samples.end());
  EXPECT_EQ(sets[0], "data.train_order=" + nlohmann::json(expected).dump());
  EXPECT_TRUE(worst_case_json(plan, d, "inputs", "oomguard run", nullptr)["seed"].is_null());
  d.synthetic = true;
  d.longest_length = 80;
  d.seed = 7;
  plan = plan_worst_case(d);
  sets = worst_case_sets(plan);
  ASSERT_EQ(sets.size(), 1u);
  EXPECT_EQ(sets[0].rfind("data.sample_lengths=[[", 0), 0u) << sets[0];
  EXPECT_EQ(worst_case_json(plan, d, "inputs", "oomguard run", nullptr)["seed"], 7);
  EXPECT_THROW(plan_worst_case(unguarded({})), std::invalid_argument);
}

}  // namespace
}  // namespace oomguard::app
