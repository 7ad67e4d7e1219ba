// harness/compare: sides matched by test, phase and tag; limits; the Markdown and the JSON
// report read back. Sides are built by hand here; tests/cli/compare_check.sh reads real ones.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "harness/compare/compare.h"
#include "harness/compare/render.h"

namespace oomguard::compare {
namespace {

constexpr int64_t kMiB = 1 << 20;

PhaseFigures phase(const std::string& name, int64_t peak, std::vector<TagBytes> live = {}) {
  PhaseFigures p;
  p.name = name;
  p.peak_allocated_bytes = peak;
  p.peak_reserved_bytes = 2 * peak;
  p.growth_bytes = 0;
  p.status = "pass";
  p.tags_known = true;
  p.live_at_peak = std::move(live);
  return p;
}

TestFigures test(const std::string& name, std::vector<PhaseFigures> phases, int seed = 0) {
  TestFigures t;
  t.name = name;
  t.conditions = {{"seed", std::to_string(seed)}, {"card", "t4"}};
  t.context = {{"LibTorch", "2.15.0"}};
  t.phases = std::move(phases);
  return t;
}

Side side(std::vector<TestFigures> tests, InputKind kind = InputKind::kTestReports) {
  return Side{"dir", kind, std::move(tests)};
}

Side base_side() {
  return side(
      {test(
           "Model.Memory",
           {phase("train", 40 * kMiB, {{"block0", 30 * kMiB}, {"head", 10 * kMiB}}),
            phase("evaluate", 20 * kMiB, {{"block0", 12 * kMiB}, {"logits", 8 * kMiB}})}),
       test("Model.Other", {phase("train", 5 * kMiB)})});
}

TEST(Compare, IdenticalSidesAreNoChange) {
  const Comparison c = compare(base_side(), base_side(), {parse_limit("1%")});
  EXPECT_FALSE(c.changed());
  EXPECT_TRUE(c.over_limit().empty());
  EXPECT_NE(render_text(c).find("outcome: no change"), std::string::npos) << render_text(c);
  EXPECT_EQ(to_json(c)["outcome"], "no_change");
}

TEST(Compare, AGrownPhaseIsNamedWithTheTagThatGrew) {
  Side head = base_side();
  head.tests[0].phases[1] =
      phase("evaluate", 84 * kMiB, {{"block0", 12 * kMiB}, {"logits", 72 * kMiB}});
  const Comparison c = compare(base_side(), head, {parse_limit("5%")});
  ASSERT_EQ(c.over_limit().size(), 1u);
  const PhaseChange& p = *c.over_limit()[0];
  EXPECT_EQ(p.test, "Model.Memory");
  EXPECT_EQ(p.phase, "evaluate");
  EXPECT_EQ(p.peak_allocated.bytes(), 64 * kMiB);
  EXPECT_DOUBLE_EQ(p.peak_allocated.percent(), 320.0);
  ASSERT_EQ(p.tag_moves.size(), 1u);
  EXPECT_EQ(p.tag_moves[0].tag, "logits");
  EXPECT_EQ(p.tag_moves[0].delta(), 64 * kMiB);
  const std::string text = render_text(c);
  EXPECT_NE(text.find("over the limit 5%: Model.Memory evaluate +64MiB"), std::string::npos)
      << text;
  EXPECT_NE(text.find("logits +64MiB"), std::string::npos) << text;
}

// Table-driven: which growth a limit lets through.
struct LimitCase {
  const char* limit;
  int64_t base, head;
  bool over;
};

TEST(Compare, LimitsHoldPeakAllocatedGrowth) {
  const LimitCase cases[] = {
      {"5%", 100 * kMiB, 105 * kMiB, false},  // exactly at the limit passes
      {"5%", 100 * kMiB, 105 * kMiB + 1, true},
      {"5%", 100 * kMiB, 50 * kMiB, false},  // shrinking never fails
      {"1MiB", 100 * kMiB, 101 * kMiB, false},
      {"1MiB", 100 * kMiB, 101 * kMiB + 1, true},
      {"0%", 0, 1, true},  // growth from nothing is over any percentage
      {"evaluate=1%", 100 * kMiB, 200 * kMiB, true},
      {"train=1%", 100 * kMiB, 200 * kMiB, false},  // another phase's limit
  };
  for (const auto& k : cases) {
    Side base = side({test("T.t", {phase("evaluate", k.base), phase("train", kMiB)})});
    Side head = side({test("T.t", {phase("evaluate", k.head), phase("train", kMiB)})});
    const Comparison c = compare(base, head, {parse_limit(k.limit)});
    EXPECT_EQ(c.over_limit().size(), k.over ? 1u : 0u)
        << k.limit << " " << k.base << " -> " << k.head;
  }
}

TEST(Compare, APhasesOwnLimitWinsOverTheGeneralOne) {
  Side base = side({test("T.t", {phase("evaluate", 100 * kMiB), phase("train", 100 * kMiB)})});
  Side head = side({test("T.t", {phase("evaluate", 110 * kMiB), phase("train", 110 * kMiB)})});
  const Comparison c = compare(base, head, {parse_limit("5%"), parse_limit("evaluate=20%")});
  ASSERT_EQ(c.over_limit().size(), 1u);
  EXPECT_EQ(c.over_limit()[0]->phase, "train");
}

TEST(Compare, BadLimitsAreRefusedNamingThem) {
  for (const char* bad : {"", "%", "five%", "-5%", "=5%", "12XB", "evaluate=", "inf%"}) {
    try {
      parse_limit(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("--fail-above"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(parse_limit("evaluate=2.5%").phase, "evaluate");
  EXPECT_DOUBLE_EQ(parse_limit("evaluate=2.5%").percent, 2.5);
  EXPECT_EQ(parse_limit("64MiB").bytes, 64 * kMiB);
}

TEST(Compare, TestsAndPhasesOnOneSideAreListedAsSuch) {
  Side head = base_side();
  head.tests.pop_back();  // Model.Other gone
  head.tests.push_back(test("Model.New", {phase("train", kMiB)}));
  head.tests[0].phases.push_back(phase("generate", 3 * kMiB));
  const Comparison c = compare(base_side(), head, {parse_limit("1%")});
  EXPECT_EQ(c.tests_only_in_base, std::vector<std::string>{"Model.Other"});
  EXPECT_EQ(c.tests_only_in_head, std::vector<std::string>{"Model.New"});
  ASSERT_EQ(c.largest_changes().size(), 1u);
  EXPECT_EQ(c.largest_changes()[0]->presence, Presence::kHeadOnly);
  EXPECT_TRUE(c.over_limit().empty()) << "a new phase has nothing to grow from";
  const std::string md = render_markdown(c);
  EXPECT_NE(md.find("only in head | `Model.Memory` | `generate`"), std::string::npos) << md;
  EXPECT_NE(md.find("- only in base: `Model.Other`"), std::string::npos) << md;
}

TEST(Compare, DifferentKindsOrConditionsCannotBeCompared) {
  EXPECT_THROW(compare(base_side(), side({}, InputKind::kRunReport), {}), InputError);
  Side other_seed = base_side();
  other_seed.tests[1].conditions[0].second = "3";
  try {
    compare(base_side(), other_seed, {});
    ADD_FAILURE() << "different seeds compared";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("test Model.Other: seed 0 vs 3"), std::string::npos)
        << e.what();
  }
}

TEST(Compare, ContextDifferencesAreSaidOnce) {
  Side head = base_side();
  for (auto& t : head.tests)
    t.context[0].second = "2.16.0";
  const Comparison c = compare(base_side(), head, {});
  EXPECT_EQ(c.notes, std::vector<std::string>{"LibTorch: 2.15.0 -> 2.16.0"});
}

TEST(Compare, MarkdownShowsTheLargestFirstAndFoldsTheRest) {
  Side base, head;
  base.kind = head.kind = InputKind::kTestReports;
  for (int i = 1; i <= 12; ++i) {
    const std::string name = "T.t" + std::to_string(i);
    base.tests.push_back(test(name, {phase("train", 100 * kMiB)}));
    head.tests.push_back(test(name, {phase("train", 100 * kMiB + i * kMiB)}));
  }
  const std::string md = render_markdown(compare(base, head, {}), 10);
  EXPECT_EQ(md.rfind(kMarkdownMarker, 0), 0u) << "the marker comes first";
  const size_t largest = md.find("| `T.t12` |"), smallest = md.find("| `T.t1` |");
  const size_t fold = md.find("<details><summary>2 smaller changes</summary>");
  ASSERT_NE(fold, std::string::npos) << md;
  EXPECT_LT(largest, fold);
  EXPECT_GT(smallest, fold) << md;
}

TEST(Compare, TheJsonReportReadsBackAsItWasWritten) {
  Side head = base_side();
  head.tests[0].phases[1] = phase("evaluate", 30 * kMiB, {{"logits", 30 * kMiB}});
  head.tests[0].phases[0].peak_reserved_bytes = -1;
  const Comparison c = compare(base_side(), head, {parse_limit("evaluate=5%")});
  const Comparison back = from_json(to_json(c), "test");
  EXPECT_EQ(to_json(back), to_json(c));
  EXPECT_THROW(from_json(nlohmann::json::object(), "empty"), InputError);
}

TEST(Compare, APhaseThatRunsTwiceIsMatchedByItsTurn) {
  Side base =
      side({test("T.t", {phase("train", kMiB), phase("evaluate", kMiB), phase("train", kMiB)})});
  Side head = base;
  head.tests[0].phases[2].peak_allocated_bytes = 100 * kMiB;  // the second train only
  const Comparison c = compare(base, head, {parse_limit("1%")});
  ASSERT_EQ(c.over_limit().size(), 1u);
  EXPECT_EQ(c.over_limit()[0]->phase_label(), "train (2)");
  EXPECT_EQ(c.over_limit()[0]->peak_allocated.bytes(), 99 * kMiB);
  head.tests[0].phases.push_back(phase("evaluate", kMiB));  // a second evaluate in head only
  const Comparison more = compare(base, head, {});
  ASSERT_EQ(more.phases.size(), 4u);
  EXPECT_EQ(more.phases[3].presence, Presence::kHeadOnly);
  EXPECT_EQ(more.phases[3].phase_label(), "evaluate (2)");
}

TEST(Compare, LimitsNamingNoPhaseOrGivenTwiceAreRefused) {
  EXPECT_THROW(compare(base_side(), base_side(), {parse_limit("evalute=1%")}), InputError);
  EXPECT_THROW(
      compare(base_side(), base_side(), {parse_limit("1%"), parse_limit("99%")}), InputError);
  EXPECT_THROW(
      compare(base_side(), base_side(), {parse_limit("train=1%"), parse_limit("train=2MiB")}),
      InputError);
}

TEST(Compare, TheVerdictNamesWhatGrewNotWhatShrank) {
  Side head = base_side();
  // evaluate grows by 4 MiB: logits +12 MiB, block0 -8 MiB (a larger move, but a shrink).
  head.tests[0].phases[1] =
      phase("evaluate", 24 * kMiB, {{"block0", 4 * kMiB}, {"logits", 20 * kMiB}});
  const std::string text = render_text(compare(base_side(), head, {parse_limit("1%")}));
  EXPECT_NE(text.find("evaluate +4MiB (+20.0%): logits +12MiB\n"), std::string::npos) << text;
}

TEST(Compare, OnlyTestsOnOneSideAreSaidInTheVerdict) {
  Side head = base_side();
  head.tests.pop_back();
  const std::string text = render_text(compare(base_side(), head, {}));
  EXPECT_NE(text.find("outcome: 0 phases changed, 1 test only in base"), std::string::npos) << text;
}

TEST(Compare, MarkdownEscapesNamesAndTags) {
  Side base = side({test("T.a|b", {phase("<b>train", kMiB, {{"x`|y", kMiB}})})});
  Side head = side({test("T.a|b", {phase("<b>train", 2 * kMiB, {{"x`|y", 2 * kMiB}})})});
  const std::string md = render_markdown(compare(base, head, {}));
  EXPECT_NE(md.find("| `T.a\\|b` | `<b>train` |"), std::string::npos) << md;
  EXPECT_NE(md.find("`x'\\|y` +1MiB"), std::string::npos) << md;
}

TEST(Compare, SignedSizes) {
  EXPECT_EQ(signed_size(64 * kMiB), "+64MiB");
  EXPECT_EQ(signed_size(-1536), "-1.5KiB");
  EXPECT_EQ(signed_size(0), "0B");
}

}  // namespace
}  // namespace oomguard::compare
