#pragma once
// A recording cut into the steps of some of its phases, and put together again with its steps
// in another order (Note [orders of steps] in <oomguard/sim/step_orders.h>): what the order
// search replays. Used by harness/sim/step_layout.cpp and step_orders.cpp alone. No Torch.
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <oomguard/sim/step_orders.h>
#include <oomguard/sim/trace.h>

namespace oomguard::sim::step_layout {

// One phase of a recorded run cut into its steps (Note [orders of steps]).
struct PhaseSteps {
  std::string name;
  bool repeat_steps = false;       // StepPhase::repeat_steps
  std::vector<int64_t> sizes;      // StepPhase::sizes, or the bytes each step allocates
  bool alike = false;              // every order gives the same figures: the steps are alike
  size_t begin = 0, end = 0;       // the phase's events [begin, end)
  std::vector<size_t> step_begin;  // step s: [step_begin[s], step_begin[s + 1] or epilogue)
  size_t epilogue = 0;             // the events after the last step
  size_t fixed = 0;                // steps that keep their place at the start
  // Per step: what it made that a later step or the epilogue frees, in allocation order.
  std::vector<std::vector<int32_t>> survivors;
  // A free of a survivor: the step that made it and its rank there, by event index.
  std::unordered_map<size_t, std::pair<size_t, size_t>> survivor_frees;
  // A free after the phase of what the last step left past it: its rank there, by event index.
  std::unordered_map<size_t, size_t> carried_frees;
  // Per step: what it made that lives past the phase, or frees what came before the phase's
  // steps; a step with either must not run twice in one order.
  std::vector<bool> repeatable;
  // What each step made and frees itself or leaves for later: given fresh slots when it runs
  // again.
  std::vector<std::vector<int32_t>> local;

  size_t steps() const { return step_begin.size(); }
  size_t step_end(size_t s) const { return s + 1 < steps() ? step_begin[s + 1] : epilogue; }
};

// The phases whose steps move, in the trace's order.
using Layout = std::vector<PhaseSteps>;

// The phases of a recording cut into their steps, in the trace's order; throws
// std::invalid_argument "the steps cannot be reordered: ..." saying why they cannot be.
Layout layout(const Trace& t, const std::vector<StepPhase>& phases);

// `recorded` with its steps in `order`, cut into steps as `l` says; throws
// std::invalid_argument for what is not an order of its steps.
Trace reorder(const Trace& recorded, const Layout& l, const StepOrder& order);

// Each phase's steps in the order recorded.
StepOrder recorded_order(const Layout& l);

}  // namespace oomguard::sim::step_layout
