#pragma once
// The reserved peak over orders of a recording's steps: a trace recorded step by step
// (memory::TraceRecorder in memory: each allocation and free with its step), the steps of
// some of its phases put in other orders and replayed through the caching-allocator model.
// `oomguard run --worst-case` searches train's and the evaluation's steps; the GoogleTest
// layer a measure_steps() phase's. No Torch.
//
// Note [orders of steps]
// The caching allocator's reserved peak depends on the order in which shapes arrive (its pool
// history), so no one order bounds it. A step's events move as a whole, its allocations with
// it. What a step leaves for later (a training step's gradients, freed by the next step's
// zero_grad; an unguarded evaluation's logits and graph, freed at the phase's end) is matched
// by rank: the r-th such allocation of the step that now comes before is freed where the r-th
// of the recorded one was. That needs every movable step to leave as many allocations behind,
// and no step to free what any step but the one before it made; otherwise the search is
// refused, saying why. A phase's first `fixed` steps keep their place (a training loop's
// first step makes the optimizer's state), the phases keep theirs, and a step that frees what
// the one before it made never comes first. A step that frees nothing made before the steps
// and leaves nothing past its phase may also run in another's place (its allocations
// renumbered) where the phase allows it: then sequences of the shapes recorded are searched,
// not just their orders. Replayed: the recorded order, shortest first, longest first, then
// climbs, each for one phase's reserved peak in turn and then for all phases' added up: from
// the best order so far for it (after the first round, moved at random three times), swap two
// steps or put one in another's place, keeping each move that does not lower the peak, until
// 8 in a row fail to raise it; until the budget of orders is spent. The highest found is a
// lower bound on the true worst; what PyTorch's allocator does with streams is not in it, nor
// the sdpa_attention rule (its bytes are not in the trace); the CPU kernels' scratch that
// the cpu_scratch rule leaves out is in it.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <oomguard/sim/replay.h>

namespace oomguard::sim {

// A phase of the trace whose steps may run in other orders.
struct StepPhase {
  std::string name;  // the trace's phase name
  size_t fixed = 0;  // its first steps keep their place
  // Each step's size, what shortest first and longest first sort by (a batch's positions);
  // empty: the bytes each step allocates.
  std::vector<int64_t> sizes;
  // The places of its orders, of the steps recorded (the recorded order is its first ones);
  // 0: as many as recorded.
  int64_t places = 0;
  // A step may also run in another's place, more than once (any batch shape the data can
  // draw may come at any step); false: orders only.
  bool repeat_steps = false;
};

struct StepOrderOptions {
  int64_t orders = 128;  // replays in all, the recorded order included
  uint64_t seed = 0;     // the random moves'
  AllocatorSettings settings;
  DeviceLimits device;
  int64_t workspace_bytes = 0;    // per cuBLAS handle, at the trace's gemm events
  std::vector<StepPhase> phases;  // in the trace's order
};

// At each place of each phase of the options, the index of the recorded step run there.
using StepOrder = std::vector<std::vector<size_t>>;

struct OrderFigures {
  StepOrder order;
  std::string how;  // "recorded", "shortest first", "longest first", "search"
  ReplayResult result;
};

struct StepOrderSearch {
  std::string refused;  // non-empty: the steps cannot be reordered, and why
  int64_t orders_tried = 0;
  // By the whole trace's reserved peak (an order that runs out of memory highest).
  OrderFigures recorded, lowest, highest;
  // The order with the highest reserved peak of each phase of the options, in their order.
  std::vector<OrderFigures> highest_of_phase;
  // Per phase of the trace, in its order: the lowest and the highest reserved peak found.
  struct PhaseSpread {
    std::string name;
    int64_t lowest_bytes = 0, highest_bytes = 0;
  };
  std::vector<PhaseSpread> phases;
};

// Searches orders of the steps of `options.phases` in `recorded` (Note [orders of steps]).
StepOrderSearch search_step_orders(const Trace& recorded, const StepOrderOptions& options);

// `recorded` with the steps of `phases` in `order`; throws std::invalid_argument (the refusal,
// or what is wrong with the order) when they cannot run so.
Trace reorder_steps(
    const Trace& recorded, const std::vector<StepPhase>& phases, const StepOrder& order);

// The recorded order of the steps of `phases` (0, 1, ... each); throws as reorder_steps.
StepOrder recorded_order(const Trace& recorded, const std::vector<StepPhase>& phases);

// The reserved peak of the last run of `phase` in `r` (a phase's figures are its last run's);
// 0 when it did not run.
int64_t last_run_reserved(const ReplayResult& r, const std::string& phase);

}  // namespace oomguard::sim
