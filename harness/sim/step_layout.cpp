#include "harness/sim/step_layout.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <stdexcept>
#include <tuple>

namespace oomguard::sim {
namespace step_layout {
namespace {

[[noreturn]] void refuse(const std::string& why) {
  throw std::invalid_argument("the steps cannot be reordered: " + why);
}

bool steps_event(const TraceEvent& e) {
  return e.op == TraceEvent::Op::kAlloc || e.op == TraceEvent::Op::kFree;
}

// The events of phase `name`, from its last phase event to the next one (a test binary may
// run a phase again); empty when it did not run.
std::pair<size_t, size_t> phase_range(const Trace& t, const std::string& name) {
  size_t begin = t.events.size(), end = t.events.size();
  for (size_t i = 0; i < t.events.size(); ++i) {
    if (t.events[i].op != TraceEvent::Op::kPhase)
      continue;
    if (begin < t.events.size() && end == t.events.size())
      end = i;
    if (t.phases[static_cast<size_t>(t.events[i].phase)] == name) {
      begin = i;
      end = t.events.size();
    }
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

// The last step may leave its share past the phase instead of to the epilogue (a loop whose
// last gradients are freed after it, or never): where it leaves the epilogue fewer than the
// first step leaves, what outlives the phase (`freed_here`: freed within it) counts as its share
// too. `made`: each step's allocations; `freed_in`: what a later step or the epilogue frees.
std::unordered_map<int32_t, bool> carried_share(
    const std::vector<std::vector<int32_t>>& made,
    const std::unordered_map<int32_t, size_t>& freed_in,
    const std::unordered_map<int32_t, bool>& freed_here) {
  std::unordered_map<int32_t, bool> carried;
  const size_t n = made.size();
  if (n < 2)
    return carried;
  size_t to_epilogue = 0, first = 0;
  for (const int32_t slot : made[n - 1])
    to_epilogue += freed_in.count(slot);
  for (const int32_t slot : made[0])
    first += freed_in.count(slot);
  if (to_epilogue < first)
    for (const int32_t slot : made[n - 1])
      if (freed_here.count(slot) == 0)
        carried[slot] = true;
  return carried;
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
  const std::unordered_map<int32_t, bool> carried = carried_share(made, freed_in, freed_here);
  std::unordered_map<int32_t, size_t> rank;
  for (size_t s = 0; s < n; ++s)
    for (const int32_t slot : made[s])
      if (freed_in.count(slot) > 0 || carried.count(slot) > 0) {
        rank[slot] = ph.survivors[s].size();
        ph.survivors[s].push_back(slot);
      }
  for (size_t i = ph.end; i < t.events.size(); ++i)
    if (t.events[i].op == TraceEvent::Op::kFree && carried.count(t.events[i].slot) > 0)
      ph.carried_frees[i] = rank[t.events[i].slot];
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

// Each step's size: as given, else the bytes it allocates.
std::vector<int64_t> step_sizes(const Trace& t, const PhaseSteps& ph, const StepPhase& given) {
  if (!given.sizes.empty())
    return given.sizes;
  std::vector<int64_t> sizes(ph.steps(), 0);
  for (size_t s = 0; s < ph.steps(); ++s)
    for (size_t i = ph.step_begin[s]; i < ph.step_end(s); ++i)
      if (t.events[i].op == TraceEvent::Op::kAlloc)
        sizes[s] += t.events[i].bytes;
  return sizes;
}

PhaseSteps phase_steps(const Trace& t, const StepPhase& given) {
  PhaseSteps ph;
  ph.name = given.name;
  ph.repeat_steps = given.repeat_steps;
  std::tie(ph.begin, ph.end) = phase_range(t, given.name);
  cut_steps(t, ph, given.name);
  find_survivors(t, ph, given.name);
  // A step that frees what the one before it made cannot come first.
  size_t fixed = given.fixed;
  for (const auto& free : ph.survivor_frees)
    if (free.first < ph.epilogue)
      fixed = std::max<size_t>(fixed, 1);
  ph.fixed = std::min(fixed, ph.steps());
  ph.sizes = step_sizes(t, ph, given);
  // Alike: of one size as given, else each allocating the same sizes in the same order.
  std::vector<std::vector<int64_t>> made(ph.steps());
  for (size_t s = 0; s < ph.steps(); ++s)
    for (size_t i = ph.step_begin[s]; i < ph.step_end(s); ++i)
      if (t.events[i].op == TraceEvent::Op::kAlloc)
        made[s].push_back(t.events[i].bytes);
  const auto all_equal = [](const auto& v) {
    return std::adjacent_find(v.begin(), v.end(), std::not_equal_to<>()) == v.end();
  };
  ph.alike = given.sizes.empty() ? all_equal(made) : all_equal(given.sizes);
  return ph;
}

// An order of the phase's steps: its first `fixed` in place, then movable steps, a step more
// than once only where it may run again, and a step left out only where nothing of it
// outlives the phase. The order may hold fewer or more places than the steps recorded.
void check_order(const std::vector<size_t>& order, const PhaseSteps& ph) {
  const auto bad = [&ph](const std::string& why) {
    throw std::invalid_argument("not an order of the " + ph.name + " steps: " + why);
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
    std::vector<TraceEvent>& out,
    std::unordered_map<size_t, int32_t>& later_slots) {
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
  // What the last step left past the phase is the last place's.
  for (const auto& [index, rank] : ph.carried_frees)
    later_slots[index] = placed.back()[rank];
}

}  // namespace

Layout layout(const Trace& t, const std::vector<StepPhase>& phases) {
  Layout l;
  for (const StepPhase& given : phases) {
    PhaseSteps ph = phase_steps(t, given);
    if (!l.empty() && ph.steps() > 0 && l.back().steps() > 0 && ph.begin < l.back().end)
      refuse(ph.name + " does not follow " + l.back().name);
    l.push_back(std::move(ph));
  }
  return l;
}

// `recorded` with its steps in `order`, cut into steps as `l` says.
Trace reorder(const Trace& recorded, const Layout& l, const StepOrder& order) {
  if (order.size() != l.size())
    throw std::invalid_argument(
        "not an order of the steps: " + std::to_string(order.size()) + " phases' orders for " +
        std::to_string(l.size()) + " phases");
  for (size_t k = 0; k < l.size(); ++k)
    check_order(order[k], l[k]);
  Trace out;
  out.phases = recorded.phases;
  out.tags = recorded.tags;
  out.slots = recorded.slots;
  out.events.reserve(recorded.events.size());
  // Frees after a phase of what its last step left past it, by event index: the new slot,
  // patched into a copy of the recording before the events after that phase are read.
  std::unordered_map<size_t, int32_t> later_slots;
  const Trace* from = &recorded;
  Trace patched;
  const auto copy = [&](size_t begin, size_t end) {
    out.events.insert(
        out.events.end(),
        from->events.begin() + static_cast<std::ptrdiff_t>(begin),
        from->events.begin() + static_cast<std::ptrdiff_t>(end));
  };
  size_t at = 0;
  for (size_t k = 0; k < l.size(); ++k) {
    const PhaseSteps& ph = l[k];
    if (ph.begin == ph.end)
      continue;
    copy(at, ph.begin);
    emit_phase(*from, ph, order[k], out.slots, out.events, later_slots);
    if (!later_slots.empty()) {
      if (from == &recorded) {
        patched = recorded;
        from = &patched;
      }
      for (const auto& [index, slot] : later_slots)
        patched.events[index].slot = slot;
      later_slots.clear();
    }
    at = ph.end;
  }
  copy(at, recorded.events.size());
  return out;
}

StepOrder recorded_order(const Layout& l) {
  StepOrder order(l.size());
  for (size_t k = 0; k < l.size(); ++k) {
    order[k].resize(l[k].steps());
    std::iota(order[k].begin(), order[k].end(), size_t{0});
  }
  return order;
}

}  // namespace step_layout

StepOrder recorded_order(const Trace& recorded, const std::vector<StepPhase>& phases) {
  return step_layout::recorded_order(step_layout::layout(recorded, phases));
}

Trace reorder_steps(
    const Trace& recorded, const std::vector<StepPhase>& phases, const StepOrder& order) {
  return step_layout::reorder(recorded, step_layout::layout(recorded, phases), order);
}

}  // namespace oomguard::sim
