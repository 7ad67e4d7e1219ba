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
  EXPECT_EQ(train.steps[1].samples.front(), 3u);
  EXPECT_LT(train.steps[0].positions, 100);
  EXPECT_EQ(plan.train_order.size(), 4u);
  EXPECT_EQ(plan.train_order[2], 3u);
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
            {order[static_cast<size_t>(2 * k)], order[static_cast<size_t>(2 * k + 1)]}, d));
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

TEST(WorstCase, ReproduceSetsNameTheOrdersAndTheLongestCorpus) {
  WorstCaseData d = unguarded({10, 40, 20, 60, 5, 7, 30});
  WorstCasePlan plan = plan_worst_case(d);
  std::vector<std::string> sets = worst_case_sets(plan, d);
  ASSERT_EQ(sets.size(), 2u);
  EXPECT_EQ(sets[0].rfind("data.train_order=[", 0), 0u) << sets[0];
  EXPECT_EQ(sets[1].rfind("data.evaluate_order=[", 0), 0u) << sets[1];
  d.synthetic = true;
  sets = worst_case_sets(plan, d);
  EXPECT_EQ(sets[0], "data.lengths=longest");
  const nlohmann::json doc = worst_case_json(plan, d, 7, "inputs", "oomguard run", false);
  EXPECT_EQ(doc["seed"], 7);
  d.synthetic = false;
  EXPECT_TRUE(worst_case_json(plan, d, 7, "inputs", "oomguard run", false)["seed"].is_null());
  EXPECT_THROW(plan_worst_case(unguarded({})), std::invalid_argument);
}

}  // namespace
}  // namespace oomguard::app
