#include "harness/app/order_search.h"

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <stdexcept>
#include <unordered_map>

namespace oomguard::app {
namespace {

using sim::Trace;
using sim::TraceEvent;

// One phase of a recorded run cut into its steps (Note [orders of steps]).
struct PhaseSteps {
  size_t begin = 0, end = 0;       // the phase's events [begin, end)
  std::vector<size_t> step_begin;  // step s: [step_begin[s], step_begin[s + 1] or epilogue)
  size_t epilogue = 0;             // the events after the last step
  size_t fixed = 0;                // steps that keep their place at the start
  // Per step: what it made that a later step or the epilogue frees, in allocation order.
  std::vector<std::vector<int32_t>> survivors;
  // A free of a survivor: the step that made it and its rank there, by event index.
  std::unordered_map<size_t, std::pair<size_t, size_t>> survivor_frees;
  // Per step: what it made that lives past the phase, or frees what came before the phase's
  // steps; a step with either must not run twice in one order.
  std::vector<bool> repeatable;
  // What each step made and frees itself or leaves for later: given fresh slots when it runs
  // again.
  std::vector<std::vector<int32_t>> local;

  size_t steps() const { return step_begin.size(); }
  size_t step_end(size_t s) const { return s + 1 < steps() ? step_begin[s + 1] : epilogue; }
};

struct Layout {
  PhaseSteps train, evaluate;
};

[[noreturn]] void refuse(const std::string& why) {
  throw std::invalid_argument("the steps cannot be reordered: " + why);
}

bool steps_event(const TraceEvent& e) {
  return e.op == TraceEvent::Op::kAlloc || e.op == TraceEvent::Op::kFree;
}

// The events of phase `name`, from its phase event to the next one; empty when it did not run.
std::pair<size_t, size_t> phase_range(const Trace& t, const std::string& name) {
  size_t begin = t.events.size(), end = t.events.size();
  for (size_t i = 0; i < t.events.size(); ++i) {
    if (t.events[i].op != TraceEvent::Op::kPhase)
      continue;
    if (begin < t.events.size()) {
      end = i;
      break;
    }
    if (t.phases[static_cast<size_t>(t.events[i].phase)] == name)
      begin = i;
  }
  return {begin, begin < t.events.size() ? end : begin};
}

// Where each step begins and ends; refused unless the steps come 0, 1, 2, ... then none.
void cut_steps(const Trace& t, PhaseSteps& ph, const std::string& name) {
  int64_t current = -1;
  ph.epilogue = ph.end;
  for (size_t i = ph.begin; i < ph.end; ++i) {
    const TraceEvent& e = t.events[i];
    if (!steps_event(e) || e.step == current)
      continue;
    if (e.step == current + 1 && ph.epilogue == ph.end) {
      ph.step_begin.push_back(i);
      current = e.step;
    } else if (e.step == -1 && current >= 0 && ph.epilogue == ph.end) {
      ph.epilogue = i;
      current = -1;
    } else {
      refuse(
          name + " step " + std::to_string(e.step) + " comes after step " +
          std::to_string(current) + " (trace line " + std::to_string(e.line) + ")");
    }
  }
}

// What each step leaves for the next step or the epilogue to free; refused when a step frees
// what another step than the one before made, or the steps leave different numbers behind.
void find_survivors(const Trace& t, PhaseSteps& ph, const std::string& name) {
  const size_t n = ph.steps();
  std::unordered_map<int32_t, size_t> made_in;  // slot -> step
  std::vector<std::vector<int32_t>> made(n);
  std::unordered_map<int32_t, size_t> freed_in;  // slot -> step, n for the epilogue
  for (size_t s = 0; s <= n; ++s) {
    const size_t from = s < n ? ph.step_begin[s] : ph.epilogue;
    const size_t to = s < n ? ph.step_end(s) : ph.end;
    for (size_t i = from; i < to; ++i) {
      const TraceEvent& e = t.events[i];
      if (e.op == TraceEvent::Op::kAlloc && s < n) {
        made_in[e.slot] = s;
        made[s].push_back(e.slot);
      } else if (e.op == TraceEvent::Op::kFree) {
        const auto it = made_in.find(e.slot);
        if (it == made_in.end() || it->second == s)
          continue;  // made before the steps, or by this step
        if (s < n && it->second + 1 != s)
          refuse(
              name + " step " + std::to_string(s) + " frees what step " +
              std::to_string(it->second) + " made");
        freed_in[e.slot] = s;
      }
    }
  }
  ph.survivors.assign(n, {});
  ph.repeatable.assign(n, true);
  ph.local.assign(n, {});
  for (size_t s = 0; s < n; ++s)
    for (size_t i = ph.step_begin[s]; i < ph.step_end(s); ++i) {
      const TraceEvent& e = t.events[i];
      if (e.op == TraceEvent::Op::kFree && made_in.count(e.slot) == 0)
        ph.repeatable[s] = false;  // frees what came before the steps
    }
  {
    std::unordered_map<int32_t, bool> freed_here;
    for (size_t i = ph.step_begin.empty() ? ph.end : ph.step_begin[0]; i < ph.end; ++i)
      if (t.events[i].op == TraceEvent::Op::kFree)
        freed_here[t.events[i].slot] = true;
    for (size_t s = 0; s < n; ++s)
      for (const int32_t slot : made[s]) {
        if (freed_here.count(slot) > 0)
          ph.local[s].push_back(slot);
        else
          ph.repeatable[s] = false;  // lives past the phase
      }
  }
  std::unordered_map<int32_t, size_t> rank;
  for (size_t s = 0; s < n; ++s)
    for (const int32_t slot : made[s])
      if (freed_in.count(slot) > 0) {
        rank[slot] = ph.survivors[s].size();
        ph.survivors[s].push_back(slot);
      }
  for (size_t s = 1; s < n; ++s)
    if (ph.survivors[s].size() != ph.survivors[0].size())
      refuse(
          name + " step " + std::to_string(s) + " leaves " +
          std::to_string(ph.survivors[s].size()) + " allocations for later, step 0 " +
          std::to_string(ph.survivors[0].size()));
  for (size_t i = ph.step_begin.empty() ? ph.end : ph.step_begin[0]; i < ph.end; ++i) {
    const TraceEvent& e = t.events[i];
    if (e.op == TraceEvent::Op::kFree && rank.count(e.slot) > 0)
      ph.survivor_frees[i] = {made_in[e.slot], rank[e.slot]};
  }
}

PhaseSteps phase_steps(const Trace& t, const std::string& name, size_t fixed) {
  PhaseSteps ph;
  std::tie(ph.begin, ph.end) = phase_range(t, name);
  cut_steps(t, ph, name);
  find_survivors(t, ph, name);
  // A step that frees what the one before it made cannot come first.
  for (const auto& free : ph.survivor_frees)
    if (free.first < ph.epilogue)
      fixed = std::max<size_t>(fixed, 1);
  ph.fixed = std::min(fixed, ph.steps());
  return ph;
}

Layout layout(const Trace& t) {
  Layout l;
  // Train's first step makes AdamW's state: it stays first.
  l.train = phase_steps(t, "train", /*fixed=*/1);
  l.evaluate = phase_steps(t, "evaluate", /*fixed=*/0);
  if (l.evaluate.steps() > 0 && l.train.steps() > 0 && l.evaluate.begin < l.train.end)
    refuse("evaluate does not follow train");
  return l;
}

// An order of the phase's steps: its first `fixed` in place, then movable steps, a step more
// than once only where it may run again, and a step left out only where nothing of it
// outlives the phase. The order may hold fewer or more places than the steps recorded.
void check_order(const std::vector<size_t>& order, const PhaseSteps& ph, const char* name) {
  const auto bad = [name](const std::string& why) {
    throw std::invalid_argument(std::string("not an order of the ") + name + " steps: " + why);
  };
  if (order.size() < ph.fixed || (order.empty() && ph.steps() > 0))
    bad(std::to_string(order.size()) + " places for " + std::to_string(ph.steps()) + " steps");
  std::vector<int> runs(ph.steps(), 0);
  for (size_t p = 0; p < order.size(); ++p) {
    if (p < ph.fixed ? order[p] != p : order[p] < ph.fixed || order[p] >= ph.steps())
      bad("step " + std::to_string(order[p]) + " at place " + std::to_string(p));
    if (++runs[order[p]] > 1 && !ph.repeatable[order[p]])
      bad("step " + std::to_string(order[p]) + " cannot run twice");
  }
  for (size_t s = 0; s < ph.steps(); ++s)
    if (runs[s] == 0 && !ph.repeatable[s])
      bad("step " + std::to_string(s) + " cannot be left out");
}

// The phase's events with its steps in `order`, frees of what a step left behind matched by
// rank to the step now before it (or now at its place, in the epilogue). A movable step's own
// allocations get fresh slots (`next_slot` on), so that a step may run more than once.
void emit_phase(
    const Trace& t,
    const PhaseSteps& ph,
    const std::vector<size_t>& order,
    int32_t& next_slot,
    std::vector<TraceEvent>& out) {
  const size_t first = ph.steps() > ph.fixed ? ph.step_begin[ph.fixed] : ph.epilogue;
  out.insert(
      out.end(),
      t.events.begin() + static_cast<std::ptrdiff_t>(ph.begin),
      t.events.begin() + static_cast<std::ptrdiff_t>(first));
  // The survivors' slots as placed, by place.
  std::vector<std::vector<int32_t>> placed(
      ph.survivors.begin(), ph.survivors.begin() + static_cast<std::ptrdiff_t>(ph.fixed));
  const auto survivor = [&](size_t i, size_t place) -> const int32_t* {
    const auto it = ph.survivor_frees.find(i);
    return it == ph.survivor_frees.end() ? nullptr : &placed[place][it->second.second];
  };
  for (size_t p = ph.fixed; p < order.size(); ++p) {
    const size_t s = order[p];
    std::unordered_map<int32_t, int32_t> fresh;
    for (const int32_t slot : ph.local[s])
      fresh[slot] = next_slot++;
    for (size_t i = ph.step_begin[s]; i < ph.step_end(s); ++i) {
      TraceEvent e = t.events[i];
      const int32_t* before = e.op == TraceEvent::Op::kFree && p > 0 ? survivor(i, p - 1) : nullptr;
      if (before != nullptr) {
        e.slot = *before;
      } else if (const auto it = fresh.find(e.slot);
                 it != fresh.end() && e.op != TraceEvent::Op::kGemm) {
        e.slot = it->second;
      }
      if (e.op == TraceEvent::Op::kAlloc)
        e.step = static_cast<int64_t>(p);
      out.push_back(e);
    }
    std::vector<int32_t>& kept = placed.emplace_back();
    for (const int32_t slot : ph.survivors[s])
      kept.push_back(fresh.count(slot) > 0 ? fresh[slot] : slot);
  }
  for (size_t i = ph.epilogue; i < ph.end; ++i) {
    TraceEvent e = t.events[i];
    const auto it = ph.survivor_frees.find(i);
    if (it != ph.survivor_frees.end()) {
      // What the last step left is the last place's; what another step left, its place's.
      size_t place = it->second.first;
      if (place + 1 == ph.steps())
        place = placed.size() - 1;
      else if (place >= placed.size() || placed.size() != ph.steps())
        throw std::invalid_argument(
            "the steps cannot be reordered: the phase's end frees what step " +
            std::to_string(it->second.first) + " left, with " + std::to_string(placed.size()) +
            " places");
      e.slot = placed[place][it->second.second];
    }
    out.push_back(e);
  }
}

// `recorded` with its steps in `order`, cut into steps as `l` says.
Trace reorder(const Trace& recorded, const Layout& l, const StepOrder& order) {
  check_order(order.train, l.train, "train");
  check_order(order.evaluate, l.evaluate, "evaluate");
  Trace out;
  out.phases = recorded.phases;
  out.tags = recorded.tags;
  out.slots = recorded.slots;
  out.events.reserve(recorded.events.size());
  size_t at = 0;
  for (const auto* ph : {&l.train, &l.evaluate}) {
    if (ph->begin == ph->end)
      continue;
    out.events.insert(
        out.events.end(),
        recorded.events.begin() + static_cast<std::ptrdiff_t>(at),
        recorded.events.begin() + static_cast<std::ptrdiff_t>(ph->begin));
    emit_phase(recorded, *ph, ph == &l.train ? order.train : order.evaluate, out.slots, out.events);
    at = ph->end;
  }
  out.events.insert(
      out.events.end(),
      recorded.events.begin() + static_cast<std::ptrdiff_t>(at),
      recorded.events.end());
  return out;
}

StepOrder own_order(const Layout& l) {
  StepOrder order;
  order.train.resize(l.train.steps());
  order.evaluate.resize(l.evaluate.steps());
  std::iota(order.train.begin(), order.train.end(), size_t{0});
  std::iota(order.evaluate.begin(), order.evaluate.end(), size_t{0});
  return order;
}

}  // namespace

StepOrder own_order(const Trace& recorded) {
  return own_order(layout(recorded));
}

sim::Trace reorder_steps(const Trace& recorded, const StepOrder& order) {
  return reorder(recorded, layout(recorded), order);
}

namespace {

// What the search climbs: an OOM above every figure, else the reserved peak of `phase`, or
// of every phase added up ("").
int64_t pressure(const sim::ReplayResult& r, const std::string& phase = "") {
  if (r.oom)
    return INT64_MAX;
  int64_t sum = 0;
  for (const auto& p : r.phases)
    if (phase.empty() || p.name == phase)
      sum += p.peak_reserved_bytes;
  return sum;
}

// `places` steps: the first `fixed` of the `recorded` in place, then of the movable ones the
// longest that fit, by their positions, shortest or longest first.
std::vector<size_t> sorted_by(
    size_t recorded,
    size_t places,
    size_t fixed,
    const std::vector<int64_t>& positions,
    bool longest) {
  const auto at = [&](size_t s) { return s < positions.size() ? positions[s] : 0; };
  std::vector<size_t> order(recorded);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(
      order.begin() + static_cast<std::ptrdiff_t>(fixed), order.end(), [&](size_t a, size_t b) {
        return at(a) < at(b);
      });
  if (places < recorded)  // the shortest left out
    order.erase(
        order.begin() + static_cast<std::ptrdiff_t>(fixed),
        order.begin() + static_cast<std::ptrdiff_t>(fixed + recorded - places));
  if (longest)
    std::reverse(order.begin() + static_cast<std::ptrdiff_t>(fixed), order.end());
  return order;
}

class Searcher {
 public:
  Searcher(const Trace& recorded, const Layout& layout, const OrderSearchOptions& options)
      : recorded_(recorded), layout_(layout), options_(options), rng_(options.seed) {}

  // Replays `order` (while the budget lasts) and keeps the figures; false when spent.
  bool try_order(const StepOrder& order, const char* how, sim::ReplayResult* result = nullptr) {
    if (search_.orders_tried >= options_.orders)
      return false;
    Trace trace;
    try {
      trace = reorder(recorded_, layout_, order);
    } catch (const std::invalid_argument&) {
      return result == nullptr;  // a step put twice where it cannot run twice: not tried
    }
    OrderFigures f{
        order,
        how,
        sim::replay(
            trace, options_.settings, options_.device, nullptr, nullptr, options_.workspace_bytes)};
    ++search_.orders_tried;
    if (search_.orders_tried == 1) {
      search_.own = search_.lowest = search_.highest = f;
      for (const auto& p : f.result.phases)
        search_.phases.push_back({p.name, p.peak_reserved_bytes, p.peak_reserved_bytes});
    }
    for (const auto& p : f.result.phases)
      for (auto& spread : search_.phases)
        if (spread.name == p.name) {
          spread.lowest_bytes = std::min(spread.lowest_bytes, p.peak_reserved_bytes);
          spread.highest_bytes = std::max(spread.highest_bytes, p.peak_reserved_bytes);
        }
    for (const char* phase : {"train", "evaluate", ""}) {
      const auto it = best_pressure_.find(phase);
      const int64_t p = pressure(f.result, phase);
      if (it == best_pressure_.end() || p > it->second) {
        best_pressure_[phase] = p;
        best_[phase] = order;
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

  // From the best order so far for `phase` ("": the phases added up), a few random moves,
  // then moves kept while its peak does not fall, until 8 in a row fail to raise it.
  void climb(size_t train_fixed, size_t evaluate_fixed, const std::string& phase, bool perturb) {
    const auto best_it = best_.find(phase);
    if (best_it == best_.end())
      return;
    StepOrder order = best_it->second;
    const bool train_only = phase == "train", evaluate_only = phase == "evaluate";
    const auto move = [&](StepOrder& o) {
      const size_t train_moves = evaluate_only ? 0 : o.train.size() - train_fixed;
      const size_t eval_moves = train_only ? 0 : o.evaluate.size() - evaluate_fixed;
      if (train_moves + eval_moves < 2)
        return false;
      const size_t a = std::uniform_int_distribution<size_t>(0, train_moves + eval_moves - 1)(rng_);
      const bool in_train = a < train_moves;
      auto& steps = in_train ? o.train : o.evaluate;
      const size_t fixed = in_train ? train_fixed : evaluate_fixed;
      const size_t span = in_train ? train_moves : eval_moves;
      const size_t place = fixed + (in_train ? a : a - train_moves);
      const size_t other = fixed + std::uniform_int_distribution<size_t>(0, span - 1)(rng_);
      if (options_.repeat_steps && std::uniform_int_distribution<int>(0, 1)(rng_) == 1)
        steps[place] = steps[other];  // that step again, in this place
      else
        std::swap(steps[place], steps[other]);
      return true;
    };
    for (int i = 0; perturb && i < 3; ++i)
      move(order);
    sim::ReplayResult best;
    if (!try_order(order, "search", &best))
      return;
    for (int stale = 0; stale < 8; ++stale) {
      StepOrder next = order;
      if (!move(next))
        return;
      sim::ReplayResult r;
      if (search_.orders_tried >= options_.orders)
        return;
      if (!try_order(next, "search", &r))
        continue;
      const int64_t now = pressure(r, phase), before = pressure(best, phase);
      if (now >= before) {
        order = next;
        best = std::move(r);
        if (now > before)
          stale = -1;
      }
    }
  }

  int64_t done_count() const { return search_.orders_tried; }
  OrderSearch done() { return std::move(search_); }

 private:
  const Trace& recorded_;
  const Layout& layout_;  // the recording cut into steps, once
  const OrderSearchOptions& options_;
  std::mt19937_64 rng_;
  OrderSearch search_;
  // Per climb target: the order with the highest pressure so far, and that pressure.
  std::map<std::string, StepOrder> best_;
  std::map<std::string, int64_t> best_pressure_;
};

}  // namespace

OrderSearch search_step_orders(const Trace& recorded, const OrderSearchOptions& options) {
  Layout l;
  try {
    l = layout(recorded);
  } catch (const std::invalid_argument& e) {
    OrderSearch refused;
    refused.refused = e.what();
    return refused;
  }
  Searcher searcher(recorded, l, options);
  StepOrder own = own_order(l);
  const size_t places =
      options.train_places > 0 ? static_cast<size_t>(options.train_places) : own.train.size();
  if (places < own.train.size())
    own.train.resize(places);
  searcher.try_order(own, "the run's own");
  // Steps of one shape give every order the same figures.
  const auto one_shape = [](const std::vector<int64_t>& p) {
    return std::adjacent_find(p.begin(), p.end(), std::not_equal_to<>()) == p.end();
  };
  if (one_shape(options.train_positions) && one_shape(options.evaluate_positions))
    return searcher.done();
  for (const bool longest : {false, true}) {
    const StepOrder sorted{
        sorted_by(l.train.steps(), places, l.train.fixed, options.train_positions, longest),
        sorted_by(
            l.evaluate.steps(),
            l.evaluate.steps(),
            l.evaluate.fixed,
            options.evaluate_positions,
            longest)};
    searcher.try_order(sorted, longest ? "longest first" : "shortest first");
  }
  // Each phase's reserved peak is a figure of its own: the climbs take turns.
  const char* targets[] = {"train", "evaluate", ""};
  for (int restart = 0; restart < 1000; ++restart) {
    const int64_t before = searcher.done_count();
    searcher.climb(l.train.fixed, l.evaluate.fixed, targets[restart % 3], restart >= 3);
    if (searcher.done_count() == before)
      break;
  }
  return searcher.done();
}

}  // namespace oomguard::app
