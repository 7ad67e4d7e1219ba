// harness/sim/step_orders: a recording's steps put in other orders (Note [orders of steps]): what a
// step leaves behind is freed by the step now after it, a step may run twice where it frees
// nothing older and keeps nothing past its phase, and the search finds the order whose pool
// history costs most.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include <oomguard/sim/step_orders.h>

namespace oomguard::sim {
namespace {

constexpr int64_t kMiB = 1 << 20;

// A run as TraceRecorder records it in memory: phases, and each event's step.
class OrderRecording {
 public:
  OrderRecording() { trace_.tags.emplace_back(); }
  void phase(const std::string& name) {
    phase_ = static_cast<int32_t>(trace_.phases.size());
    trace_.phases.push_back(name);
    push(TraceEvent::phase_start(phase_, 0));
  }
  int32_t alloc(int64_t bytes, int64_t step) {
    const int32_t slot = trace_.slots++;
    push(TraceEvent::alloc(slot, bytes, slot + 1, phase_, 0, step, 0));
    return slot;
  }
  void free(int32_t slot, int64_t step) {
    TraceEvent e = TraceEvent::free(slot, slot + 1, 0);
    e.step = step;
    push(e);
  }
  const Trace& trace() const { return trace_; }

 private:
  void push(TraceEvent e) {
    e.line = static_cast<int64_t>(trace_.events.size()) + 1;
    trace_.events.push_back(e);
  }
  Trace trace_;
  int32_t phase_ = 0;
};

// Train: step s makes an activation of `act[s]` MiB, frees it, then makes a 3 MiB gradient the next
// step frees (the last one's the epilogue); step 0 also makes the optimizer's state, kept.
// Evaluate: each batch keeps `kept[s]` MiB to the phase's end.
Trace run(const std::vector<int64_t>& act, const std::vector<int64_t>& kept) {
  OrderRecording r;
  r.phase("setup");
  r.alloc(4 * kMiB, -1);  // parameters
  r.phase("train");
  int32_t grad = -1;
  for (size_t s = 0; s < act.size(); ++s) {
    const auto step = static_cast<int64_t>(s);
    const int32_t a = r.alloc(act[s] * kMiB, step);
    if (s == 0)
      r.alloc(8 * kMiB, step);  // AdamW's state
    r.free(a, step);
    if (grad >= 0)
      r.free(grad, step);
    grad = r.alloc(3 * kMiB, step);
  }
  r.free(grad, -1);
  r.phase("evaluate");
  std::vector<int32_t> logits;
  for (size_t s = 0; s < kept.size(); ++s)
    logits.push_back(r.alloc(kept[s] * kMiB, static_cast<int64_t>(s)));
  for (const int32_t slot : logits)
    r.free(slot, -1);
  return r.trace();
}

// The phases `run` records, as oomguard run --worst-case moves them: train's first step stays
// first (it makes AdamW's state).
std::vector<StepPhase> phases(const std::vector<int64_t>& train_sizes = {}) {
  std::vector<StepPhase> p(2);
  p[0].name = "train";
  p[0].fixed = 1;
  p[0].sizes = train_sizes;
  p[1].name = "evaluate";
  return p;
}

// Every slot allocated once and freed at most once, after its allocation; returns the slots
// still live at the end.
std::set<int32_t> check_lifetimes(const Trace& t) {
  std::set<int32_t> live, seen;
  for (const TraceEvent& e : t.events) {
    if (e.op == TraceEvent::Op::kAlloc) {
      EXPECT_TRUE(seen.insert(e.slot).second) << "slot " << e.slot << " allocated twice";
      live.insert(e.slot);
    } else if (e.op == TraceEvent::Op::kFree) {
      EXPECT_EQ(live.erase(e.slot), 1u) << "slot " << e.slot << " freed while not live";
    }
    EXPECT_LT(e.slot, t.slots);
  }
  return live;
}

// The bytes allocated, in order, of the events of `phase`.
std::vector<int64_t> allocations(const Trace& t, const std::string& phase) {
  std::vector<int64_t> out;
  for (const TraceEvent& e : t.events)
    if (e.op == TraceEvent::Op::kAlloc && t.phases[static_cast<size_t>(e.phase)] == phase)
      out.push_back(e.bytes / kMiB);
  return out;
}

TEST(StepOrders, TheRecordedOrderIsTheRecording) {
  const Trace t = run({2, 6, 4, 10}, {3, 5});
  const StepOrder own = recorded_order(t, phases());
  EXPECT_EQ(own, (StepOrder{{0, 1, 2, 3}, {0, 1}}));
  const Trace again = reorder_steps(t, phases(), own);
  ASSERT_EQ(again.events.size(), t.events.size());
  for (size_t i = 0; i < t.events.size(); ++i) {
    EXPECT_EQ(again.events[i].op, t.events[i].op) << i;
    EXPECT_EQ(again.events[i].bytes, t.events[i].bytes) << i;
  }
}

TEST(StepOrders, WhatAStepLeavesIsFreedByTheStepNowAfterIt) {
  const Trace t = run({2, 6, 4, 10}, {3, 5, 7});
  const Trace moved = reorder_steps(t, phases(), {{0, 3, 1, 2}, {2, 0, 1}});
  EXPECT_EQ(check_lifetimes(moved).size(), 2u);  // parameters and AdamW's state
  EXPECT_EQ(allocations(moved, "train"), (std::vector<int64_t>{2, 8, 3, 10, 3, 6, 3, 4, 3}));
  EXPECT_EQ(allocations(moved, "evaluate"), (std::vector<int64_t>{7, 3, 5}));
}

TEST(StepOrders, AStepRunsTwiceWithFreshSlotsUnlessItKeepsOrFreesOlderThings) {
  const Trace t = run({2, 6, 4, 10}, {3, 5});
  const Trace twice = reorder_steps(t, phases(), {{0, 3, 3, 3}, {1, 1}});
  EXPECT_EQ(check_lifetimes(twice).size(), 2u);
  EXPECT_EQ(allocations(twice, "train"), (std::vector<int64_t>{2, 8, 3, 10, 3, 10, 3, 10, 3}));
  EXPECT_GT(twice.slots, t.slots);
  // Step 0 stays first: AdamW's state is made there.
  EXPECT_THROW(reorder_steps(t, phases(), {{1, 0, 2, 3}, {0, 1}}), std::invalid_argument);
  // Fewer places than steps: the last place's step leaves its gradient to the phase's end.
  const Trace fewer = reorder_steps(t, phases(), {{0, 3, 1}, {0, 1}});
  EXPECT_EQ(check_lifetimes(fewer).size(), 2u);
  EXPECT_EQ(allocations(fewer, "train"), (std::vector<int64_t>{2, 8, 3, 10, 3, 6, 3}));
  // Evaluate's end frees what every batch kept: its places are its batches.
  EXPECT_THROW(reorder_steps(t, phases(), {{0, 1, 2, 3}, {0}}), std::invalid_argument);
}

TEST(StepOrders, AStepFreeingWhatAnOlderStepMadeIsRefusedSayingWhy) {
  OrderRecording r;
  r.phase("train");
  const int32_t a = r.alloc(kMiB, 0);
  r.alloc(kMiB, 1);
  r.free(a, 2);  // step 2 frees step 0's
  StepOrderOptions options;
  options.phases = phases();
  const StepOrderSearch search = search_step_orders(r.trace(), options);
  EXPECT_NE(search.refused.find("train step 2 frees what step 0 made"), std::string::npos)
      << search.refused;
  EXPECT_EQ(search.orders_tried, 0);
}

// Each step's gradient (3 MiB) is made after its activation is freed, so it splits that cached
// block, and a longer activation after it needs a segment of its own: how much the pool holds
// depends on the order of the steps. The search finds the costlier order, within its budget.
// The training steps of the search tests: activations whose order decides the pool's history.
const std::vector<int64_t> kActs = {12, 30, 12, 30, 14, 26};

// 20 orders on a card with room for everything, of `searched`.
StepOrderOptions twenty_orders(std::vector<StepPhase> searched) {
  StepOrderOptions options;
  options.orders = 20;
  options.device = DeviceLimits::capacity(int64_t{1} << 34);
  options.phases = std::move(searched);
  return options;
}

TEST(StepOrders, TheSearchFindsTheOrderWhosePoolHistoryCostsMost) {
  const Trace t = run(kActs, {});
  const StepOrderOptions options = twenty_orders(phases(kActs));
  const StepOrderSearch search = search_step_orders(t, options);
  ASSERT_TRUE(search.refused.empty()) << search.refused;
  EXPECT_LE(search.orders_tried, 20);
  EXPECT_GE(search.highest.result.peak_reserved_bytes, search.recorded.result.peak_reserved_bytes);
  // The run's own order holds 70 MiB; shortest first, each gradient splits the block the next,
  // longer step needs, 96 MiB.
  EXPECT_EQ(search.recorded.result.peak_reserved_bytes, 70 * kMiB);
  EXPECT_GE(search.highest.result.peak_reserved_bytes, 96 * kMiB);
  ASSERT_FALSE(search.phases.empty());
  // The highest order, replayed again, gives the figure reported.
  const ReplayResult again = replay(
      reorder_steps(t, options.phases, search.highest.order),
      options.settings,
      options.device,
      nullptr,
      nullptr,
      0);
  EXPECT_EQ(again.peak_reserved_bytes, search.highest.result.peak_reserved_bytes);
}

// One phase alone, its steps sized by what they allocate (the GoogleTest layer's
// measure_steps()): the search finds the costlier order without being told the sizes, and
// names it as that phase's highest.
TEST(StepOrders, OnePhaseIsSearchedBySizesItsStepsAllocate) {
  const Trace t = run(kActs, {});
  const StepOrderOptions options = twenty_orders({phases().front()});
  const StepOrderSearch search = search_step_orders(t, options);
  ASSERT_TRUE(search.refused.empty()) << search.refused;
  ASSERT_EQ(search.highest_of_phase.size(), 1u);
  const OrderFigures& worst = search.highest_of_phase[0];
  EXPECT_GE(worst.result.peak_reserved_bytes, 96 * kMiB);
  EXPECT_EQ(worst.order[0].front(), 0u);  // the first step kept its place
  const ReplayResult again =
      replay(reorder_steps(t, options.phases, worst.order), options.settings, options.device);
  ASSERT_EQ(search.phases[1].name, "train");
  EXPECT_EQ(again.phases[1].peak_reserved_bytes, search.phases[1].highest_bytes);
  // An order for phases the options do not have is refused, saying so.
  EXPECT_THROW(reorder_steps(t, options.phases, {{0, 1}, {0}}), std::invalid_argument);
}

// A loop whose last gradients outlive its phase (zero_grad at each step's start, the
// optimizer kept past the loop): the last step leaves its share past the phase, and what is
// freed after the phase is the step now last's.
TEST(StepOrders, WhatTheLastStepLeavesPastThePhaseIsTheStepNowLasts) {
  OrderRecording r;
  r.phase("train");
  const std::vector<int64_t> grads = {1, 2, 3};  // each step's gradient, MiB
  int32_t grad = -1;
  for (size_t s = 0; s < grads.size(); ++s) {
    if (grad >= 0)
      r.free(grad, static_cast<int64_t>(s));
    grad = r.alloc(grads[s] * kMiB, static_cast<int64_t>(s));
  }
  r.phase("teardown");
  r.free(grad, -1);
  const std::vector<StepPhase> train = {phases().front()};
  const Trace moved = reorder_steps(r.trace(), train, {{0, 2, 1}});
  EXPECT_TRUE(check_lifetimes(moved).empty()) << "every gradient freed once";
  EXPECT_EQ(allocations(moved, "train"), (std::vector<int64_t>{1, 3, 2}));
  // The teardown frees step 1's gradient, made last now.
  const TraceEvent& last_free = moved.events.back();
  ASSERT_EQ(last_free.op, TraceEvent::Op::kFree);
  int64_t bytes = 0;
  for (const TraceEvent& e : moved.events)
    if (e.op == TraceEvent::Op::kAlloc && e.slot == last_free.slot)
      bytes = e.bytes;
  EXPECT_EQ(bytes, 2 * kMiB);
}

}  // namespace
}  // namespace oomguard::sim
