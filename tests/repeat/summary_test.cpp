// harness/repeat: flake statistics, summaries, shard merging, JUnit.
#include <gtest/gtest.h>

#include <cmath>

#include "harness/repeat/flake_stats.h"
#include "harness/repeat/summary.h"

namespace oomguard::repeat {
namespace {

struct WilsonCase {
  int64_t k, n;
  double lo, hi;  // from the closed form, to 4 decimals
};

TEST(FlakeStats, WilsonIntervalMatchesTheClosedForm) {
  const WilsonCase cases[] = {
      {0, 12, 0.0, 0.2425},  // z^2 / (n + z^2)
      {5, 12, 0.1933, 0.6805},
      {12, 12, 0.7575, 1.0},
      {1, 100, 0.0018, 0.0545},
  };
  for (const auto& c : cases) {
    const Interval w = wilson_interval(c.k, c.n);
    EXPECT_NEAR(w.lo, c.lo, 1e-4) << c.k << "/" << c.n;
    EXPECT_NEAR(w.hi, c.hi, 1e-4) << c.k << "/" << c.n;
  }
}

TEST(FlakeStats, ZeroFailureBoundIsTheExactBinomialOne) {
  EXPECT_NEAR(zero_failure_upper_bound(12), 0.2209, 1e-4);  // 1 - 0.05^(1/12)
  EXPECT_NEAR(zero_failure_upper_bound(100), 0.0295, 1e-4);
  // At the bound, passing every run is exactly 5% likely.
  EXPECT_NEAR(std::pow(1.0 - zero_failure_upper_bound(30), 30), 0.05, 1e-12);
}

TEST(FlakeStats, SpreadTakesTheMiddleOfAnEvenCount) {
  const Spread odd = spread_of({5, 1, 3});
  EXPECT_EQ(odd.min, 1);
  EXPECT_EQ(odd.median, 3.0);
  EXPECT_EQ(odd.max, 5);
  EXPECT_EQ(spread_of({4, 1, 3, 2}).median, 2.5);
  EXPECT_EQ(spread_of({}).count, 0);
}

Iteration make_iteration(uint64_t seed, const std::string& outcome, int64_t eval_peak) {
  Iteration it;
  it.seed = seed;
  it.outcome = memory::phase_status_from_string(outcome);
  it.exit_code = outcome == "pass" ? 0 : (outcome == "oom" ? 3 : 1);
  it.wall_seconds = 1.0 + static_cast<double>(seed);
  it.phases = {
      {"train", memory::PhaseStatus::kPass, 100, 200}, {"evaluate", it.outcome, eval_peak, 50}};
  if (outcome == "oom")
    it.detail = "out of memory in evaluate: Tried to allocate 2.00 MiB";
  return it;
}

Summary example(int64_t shard_index, int64_t shard_count) {
  Summary s;
  s.plan.seed_start = 10;
  s.plan.runs = 6;
  s.plan.shard_index = shard_index;
  s.plan.shard_count = shard_count;
  s.plan.program = "build/cpu/bin/oomguard";
  s.plan.run_args = {"--disable-guard", "all", "--capacity", "300MiB"};
  const char* outcomes[] = {"pass", "oom", "pass", "budget_exceeded", "pass", "pass"};
  for (uint64_t seed : s.plan.seeds()) {
    const auto i = static_cast<int64_t>(seed - 10);
    s.iterations.push_back(make_iteration(seed, outcomes[i], 40 + 3 * i));
  }
  return s;
}

TEST(Summary, ShardsSplitTheSeedRange) {
  EXPECT_EQ(example(0, 2).plan.seeds(), (std::vector<uint64_t>{10, 12, 14}));
  EXPECT_EQ(example(1, 2).plan.seeds(), (std::vector<uint64_t>{11, 13, 15}));
  EXPECT_EQ(example(0, 1).plan.seeds().size(), 6u);
}

TEST(Summary, MergedShardsGiveTheStatisticsOfOneRun) {
  const Summary whole = example(0, 1);
  const Summary merged = merge({example(1, 2), example(0, 2)});
  EXPECT_EQ(to_json(merged), to_json(whole));
  const nlohmann::json stats = to_json(whole).at("statistics");
  EXPECT_EQ(stats.at("runs"), 6);
  EXPECT_EQ(stats.at("failures"), 2);
  EXPECT_EQ(stats.at("worst_seed"), 11);  // the OOM beats the budget failure
  EXPECT_EQ(
      stats.at("reproduce"),
      "build/cpu/bin/oomguard run --seed 11 --disable-guard all --capacity 300MiB");
  EXPECT_TRUE(stats.at("upper_bound_95").is_null());
  EXPECT_EQ(stats.at("peaks")[1].at("median_bytes"), 47.5);  // evaluate: 40 .. 55 step 3
}

TEST(Summary, WorstSeedFollowsTheRunsOwnRanking) {
  // A near-OOM (retries under --fail-on-retry) is milder than an OOM, as in a run's outcome.
  Summary s = example(0, 1);
  s.iterations[3] = make_iteration(13, "near_oom", 80);
  EXPECT_EQ(to_json(s).at("statistics").at("worst_seed"), 11);
  s.iterations[1] = make_iteration(11, "pass", 40);
  EXPECT_EQ(to_json(s).at("statistics").at("worst_seed"), 13);
  s.iterations[4] = make_iteration(14, "error", 0);
  EXPECT_EQ(to_json(s).at("statistics").at("worst_seed"), 14);
}

TEST(Summary, ReadingRefusesAnOutcomeNoRunWrites) {
  nlohmann::json doc = to_json(example(0, 1));
  doc["iterations"][0]["outcome"] = "flaky";
  try {
    summary_from_json(doc);
    FAIL() << "an unknown outcome was read";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("\"flaky\" is not a phase status"), std::string::npos)
        << e.what();
  }
}

TEST(Summary, MergeRefusesMismatchedOrOverlappingShards) {
  Summary other = example(1, 2);
  other.plan.run_args.push_back("--card");
  EXPECT_THROW(merge({example(0, 2), other}), std::invalid_argument);
  EXPECT_THROW(merge({example(0, 2), example(0, 2)}), std::invalid_argument);
  EXPECT_THROW(merge({}), std::invalid_argument);
}

TEST(Summary, RoundTripsThroughJson) {
  const Summary s = example(1, 2);
  EXPECT_EQ(to_json(summary_from_json(to_json(s))), to_json(s));
  nlohmann::json broken = to_json(s);
  broken["plan"].erase("runs");
  EXPECT_THROW(summary_from_json(broken), std::invalid_argument);
  EXPECT_THROW(summary_from_json(nlohmann::json::object()), std::invalid_argument);
}

TEST(Summary, AllPassingReportsTheRateBound) {
  Summary s = example(0, 1);
  for (auto& it : s.iterations)
    it.outcome = memory::PhaseStatus::kPass;
  EXPECT_NEAR(to_json(s).at("statistics").at("upper_bound_95").get<double>(), 0.3930, 1e-4);
}

TEST(Summary, JunitKeepsEveryIterationAsATestCase) {
  Summary s = example(0, 1);
  s.iterations[1].detail = "message with <angle> & \"quotes\"";
  const std::string xml = to_junit(s);
  size_t cases = 0, failures = 0;
  for (size_t at = 0; (at = xml.find("<testcase ", at)) != std::string::npos; ++at)
    ++cases;
  for (size_t at = 0; (at = xml.find("<failure ", at)) != std::string::npos; ++at)
    ++failures;
  EXPECT_EQ(cases, 6u);
  EXPECT_EQ(failures, 2u);
  EXPECT_NE(xml.find("tests=\"6\" failures=\"2\""), std::string::npos);
  EXPECT_NE(xml.find("name=\"seed_11\""), std::string::npos);
  EXPECT_NE(xml.find("&lt;angle&gt; &amp; &quot;quotes&quot;"), std::string::npos);
  EXPECT_EQ(xml.find("<angle>"), std::string::npos);
}

// repeat --worst-case: each phase's highest seed set against the worst case's bound, carried
// through the summary JSON and through a merge of shards.
TEST(Summary, TheWorstCaseIsComparedWithTheHighestSeedAndRoundTrips) {
  Summary s = example(0, 1);
  s.worst_case = WorstCaseRun{
      memory::PhaseStatus::kBudgetExceeded, 1, {{"train", 150}, {"evaluate", 900}}, "oomguard run"};
  const std::vector<WorstCaseComparison> compared = compare_with_worst_case(s);
  ASSERT_EQ(compared.size(), 2u);
  EXPECT_EQ(compared[0].highest_seed_bytes, 100);
  int64_t highest = 0;
  uint64_t seed = 0;
  for (const Iteration& it : s.iterations)
    if (it.phases[1].peak_bytes > highest) {
      highest = it.phases[1].peak_bytes;
      seed = it.seed;
    }
  EXPECT_EQ(compared[1].highest_seed_bytes, highest);
  EXPECT_EQ(compared[1].highest_seed, seed);
  const nlohmann::json doc = to_json(s);
  EXPECT_EQ(doc["worst_case"]["phases"][1]["bound_bytes"], 900);
  const Summary back = summary_from_json(doc);
  ASSERT_TRUE(back.worst_case.has_value());
  EXPECT_EQ(back.worst_case->bounds, s.worst_case->bounds);
  EXPECT_EQ(back.worst_case->reproduce, "oomguard run");
  EXPECT_TRUE(to_json(example(0, 1))["worst_case"].is_null());
  Summary other = example(1, 2);
  EXPECT_FALSE(merge({example(0, 2), other}).worst_case.has_value());
  Summary first = example(0, 2);
  first.worst_case = s.worst_case;
  EXPECT_EQ(merge({other, first}).worst_case->bounds, s.worst_case->bounds);
}

}  // namespace
}  // namespace oomguard::repeat
