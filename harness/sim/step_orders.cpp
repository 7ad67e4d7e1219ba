// The search over orders of a recording's steps (Note [orders of steps]): the orders tried, the
// climbs, the figures kept. The recording cut into steps and put together again in an order is
// harness/sim/step_layout.cpp.
#include <oomguard/sim/step_orders.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <stdexcept>

#include "harness/sim/step_layout.h"

namespace oomguard::sim {

int64_t last_run_reserved(const ReplayResult& r, const std::string& phase) {
  int64_t bytes = 0;
  for (const auto& p : r.phases)
    if (p.name == phase)
      bytes = p.peak_reserved_bytes;
  return bytes;
}

namespace {

using step_layout::Layout;
using step_layout::PhaseSteps;

// What the search climbs: an OOM above every figure, else the reserved peak of `phase`, or
// of every phase added up ("").
// A phase's figures are those of its last run (the one searched, Note [orders of steps]).
int64_t pressure(const ReplayResult& r, const std::string& phase = "") {
  if (r.oom)
    return INT64_MAX;
  if (!phase.empty())
    return last_run_reserved(r, phase);
  int64_t sum = 0;
  for (const auto& p : r.phases)
    sum += p.peak_reserved_bytes;
  return sum;
}

// `places` steps: the first `fixed` of the phase's in place, then of the movable ones the
// largest that fit, by their sizes, smallest or largest first.
std::vector<size_t> sorted_by(const PhaseSteps& ph, size_t places, bool largest) {
  const auto size = [&](size_t s) { return s < ph.sizes.size() ? ph.sizes[s] : 0; };
  std::vector<size_t> order(ph.steps());
  std::iota(order.begin(), order.end(), size_t{0});
  const auto movable = order.begin() + static_cast<std::ptrdiff_t>(ph.fixed);
  std::stable_sort(movable, order.end(), [&](size_t a, size_t b) { return size(a) < size(b); });
  if (places < order.size())  // the smallest left out
    order.erase(movable, movable + static_cast<std::ptrdiff_t>(order.size() - places));
  if (largest)
    std::reverse(order.begin() + static_cast<std::ptrdiff_t>(ph.fixed), order.end());
  return order;
}

class Searcher {
 public:
  Searcher(const Trace& recorded, const Layout& layout, const StepOrderOptions& options)
      : recorded_(recorded), layout_(layout), options_(options), rng_(options.seed) {}

  // Replays `order` (while the budget lasts) and keeps the figures; false when spent.
  // An order tried before is not replayed again, nor counted: its figures are kept.
  bool try_order(const StepOrder& order, const char* how, ReplayResult* result = nullptr) {
    if (const auto seen = seen_.find(order); seen != seen_.end()) {
      if (result != nullptr)
        *result = seen->second;
      return true;
    }
    if (search_.orders_tried >= options_.orders)
      return false;
    Trace trace;
    try {
      trace = step_layout::reorder(recorded_, layout_, order);
    } catch (const std::invalid_argument& e) {
      if (search_.orders_tried == 0)
        search_.refused = e.what();  // the recorded order itself
      return result == nullptr;      // a step put twice where it cannot run twice: not tried
    }
    OrderFigures f{
        order,
        how,
        replay(
            trace, options_.settings, options_.device, nullptr, nullptr, options_.workspace_bytes)};
    seen_.emplace(order, f.result);
    if (++search_.orders_tried == 1)
      first(f);
    // The spread is of the orders that ran to their end; a phase by its place in the run.
    if (!f.result.oom)
      for (size_t i = 0; i < f.result.phases.size() && i < search_.phases.size(); ++i) {
        auto& spread = search_.phases[i];
        const int64_t bytes = f.result.phases[i].peak_reserved_bytes;
        spread.lowest_bytes = std::min(spread.lowest_bytes, bytes);
        spread.highest_bytes = std::max(spread.highest_bytes, bytes);
      }
    for (size_t k = 0; k <= layout_.size(); ++k) {
      const std::string target = k < layout_.size() ? layout_[k].name : "";
      const auto it = best_pressure_.find(target);
      const int64_t p = pressure(f.result, target);
      if (it == best_pressure_.end() || p > it->second) {
        best_pressure_[target] = p;
        best_[target] = order;
        if (k < layout_.size())
          search_.highest_of_phase[k] = f;
      }
    }
    if (pressure(f.result) > pressure(search_.highest.result))
      search_.highest = f;
    if (pressure(f.result) < pressure(search_.lowest.result))
      search_.lowest = f;
    if (result != nullptr)
      *result = std::move(f.result);
    return true;
  }

  // From the best order so far for `target` (a phase's name; "": the phases added up), a few
  // random moves, then moves kept while its peak does not fall, until 8 in a row fail to
  // raise it.
  void climb(const std::string& target, bool perturb) {
    const auto best_it = best_.find(target);
    if (best_it == best_.end())
      return;
    StepOrder order = best_it->second;
    for (int i = 0; perturb && i < 3; ++i)
      move(order, target);
    ReplayResult best;
    if (!try_order(order, "search", &best))
      return;
    for (int stale = 0; stale < 8; ++stale) {
      StepOrder next = order;
      if (!move(next, target) || search_.orders_tried >= options_.orders)
        return;
      ReplayResult r;
      if (!try_order(next, "search", &r))
        continue;
      const int64_t now = pressure(r, target), before = pressure(best, target);
      if (now >= before) {
        order = next;
        best = std::move(r);
        if (now > before)
          stale = -1;
      }
    }
  }

  int64_t done_count() const { return search_.orders_tried; }
  StepOrderSearch done() { return std::move(search_); }

 private:
  void first(const OrderFigures& f) {
    search_.recorded = search_.lowest = search_.highest = f;
    search_.highest_of_phase.assign(layout_.size(), f);
    for (const auto& p : f.result.phases)
      search_.phases.push_back({p.name, p.peak_reserved_bytes, p.peak_reserved_bytes});
  }

  // One move in a phase that `target` climbs (every phase for ""): two steps swapped, or,
  // where the phase allows it, a step run again in another's place. False when no phase has
  // two movable places.
  bool move(StepOrder& o, const std::string& target) {
    size_t total = 0;
    for (size_t k = 0; k < layout_.size(); ++k)
      if (target.empty() || layout_[k].name == target)
        total += o[k].size() - std::min(o[k].size(), layout_[k].fixed);
    if (total < 2)
      return false;
    size_t a = std::uniform_int_distribution<size_t>(0, total - 1)(rng_);
    for (size_t k = 0; k < layout_.size(); ++k) {
      if (!target.empty() && layout_[k].name != target)
        continue;
      const size_t fixed = std::min(o[k].size(), layout_[k].fixed);
      const size_t span = o[k].size() - fixed;
      if (a >= span) {
        a -= span;
        continue;
      }
      const size_t place = fixed + a;
      const size_t other = fixed + std::uniform_int_distribution<size_t>(0, span - 1)(rng_);
      if (layout_[k].repeat_steps && std::uniform_int_distribution<int>(0, 1)(rng_) == 1)
        o[k][place] = o[k][other];  // that step again, in this place
      else
        std::swap(o[k][place], o[k][other]);
      return true;
    }
    return false;
  }

  const Trace& recorded_;
  const Layout& layout_;  // the recording cut into steps, once
  const StepOrderOptions& options_;
  std::mt19937_64 rng_;
  StepOrderSearch search_;
  // Per climb target: the order with the highest pressure so far, and that pressure.
  std::map<std::string, StepOrder> best_;
  std::map<std::string, int64_t> best_pressure_;
  std::map<StepOrder, ReplayResult> seen_;  // the orders replayed, and what each gave
};

}  // namespace

StepOrderSearch search_step_orders(const Trace& recorded, const StepOrderOptions& options) {
  Layout l;
  try {
    l = step_layout::layout(recorded, options.phases);
  } catch (const std::invalid_argument& e) {
    StepOrderSearch refused;
    refused.refused = e.what();
    return refused;
  }
  Searcher searcher(recorded, l, options);
  StepOrder recorded_steps = step_layout::recorded_order(l);
  std::vector<size_t> places(l.size());
  for (size_t k = 0; k < l.size(); ++k) {
    const int64_t given = options.phases[k].places;
    places[k] = given > 0 ? static_cast<size_t>(given) : l[k].steps();
    if (places[k] < recorded_steps[k].size())
      recorded_steps[k].resize(places[k]);
  }
  searcher.try_order(recorded_steps, "recorded");
  if (searcher.done_count() == 0) {
    StepOrderSearch refused = searcher.done();
    refused.refused = "the recorded order cannot be replayed: " + refused.refused;
    return refused;
  }
  // Steps alike give every order the same figures.
  if (std::all_of(l.begin(), l.end(), [](const PhaseSteps& ph) { return ph.alike; }))
    return searcher.done();
  for (const bool largest : {false, true}) {
    StepOrder sorted;
    for (size_t k = 0; k < l.size(); ++k)
      sorted.push_back(sorted_by(l[k], places[k], largest));
    searcher.try_order(sorted, largest ? "longest first" : "shortest first");
  }
  // Each phase's reserved peak is a figure of its own: the climbs take turns, then all added up.
  std::vector<std::string> targets;
  for (const PhaseSteps& ph : l)
    targets.push_back(ph.name);
  targets.emplace_back();
  for (size_t restart = 0; restart < 1000; ++restart) {
    const int64_t before = searcher.done_count();
    searcher.climb(targets[restart % targets.size()], restart >= targets.size());
    if (searcher.done_count() == before)
      break;
  }
  return searcher.done();
}

}  // namespace oomguard::sim
