#pragma once
// The reserved peak over orders of a run's steps (`oomguard run --worst-case` with the
// allocator model): the run recorded step by step in memory (memory::TraceRecorder), its
// train steps after the first and its evaluation batches put in other orders and replayed
// through the caching-allocator model. No Torch.
//
// Note [orders of steps]
// The caching allocator's reserved peak depends on the order in which shapes arrive (its pool
// history), so no one order bounds it. A step's events move as a whole, its allocations with
// it. What a step leaves for later (train: its gradients, freed by the next step's
// zero_grad; an unguarded evaluation: each batch's logits and graph, freed at the phase's
// end) is matched by rank: the r-th such allocation of the step that now comes before is
// freed where the r-th of the recorded one was. That needs every movable step to leave as
// many allocations behind, and no step to free what any step but the one before it made;
// otherwise the search is refused, saying why. Train's first step stays first (AdamW's state
// is made there), and so do the phases. A step that frees nothing made before the steps and
// leaves nothing past its phase may also run in another's place (its allocations renumbered):
// then sequences of the shapes recorded are searched, not just their orders. Replayed: the
// run's own order, shortest first, longest first, then climbs, each for one phase's reserved
// peak in turn (train, evaluate, then all added up): from the best order so far for it (after
// the first three, moved at random three times), swap two steps or put one in another's place,
// keeping each move that does not lower the peak, until 8 in a row fail to raise it; until the
// budget of orders is spent. The highest found is a lower
// bound on the true worst; what PyTorch's allocator does with streams, and the attention
// rule (sdpa_attention, which replays do not apply), are not in it.
#include <cstdint>
#include <string>
#include <vector>

#include <oomguard/sim/replay.h>

namespace oomguard::app {

struct OrderSearchOptions {
  int64_t orders = 128;  // replays in all, the run's own order included
  uint64_t seed = 0;     // the random orders'
  sim::AllocatorSettings settings;
  sim::DeviceLimits device;
  int64_t workspace_bytes = 0;  // per cuBLAS handle, at the trace's gemm events
  // Each step's positions (its batch's T), train's and evaluate's in the order run: what
  // shortest first and longest first sort by.
  std::vector<int64_t> train_positions, evaluate_positions;
  // The places of train's orders: a plain run's steps, of the steps recorded (the run's own
  // order is its first ones); 0: as many as recorded.
  int64_t train_places = 0;
  // A step may also run in another's place, more than once (the synthetic corpus: any batch
  // shape its generator can draw may come at any step); without it, orders only.
  bool repeat_steps = false;
};

// An order of the recorded steps: at each place, the index of the step run there.
struct StepOrder {
  std::vector<size_t> train, evaluate;
  bool operator==(const StepOrder& o) const { return train == o.train && evaluate == o.evaluate; }
};

struct OrderFigures {
  StepOrder order;
  std::string how;  // "the run's own", "shortest first", "longest first", "search"
  sim::ReplayResult result;
};

struct OrderSearch {
  std::string refused;  // non-empty: the steps cannot be reordered, and why
  int64_t orders_tried = 0;
  OrderFigures own, lowest, highest;  // by the whole run's reserved peak (the first OOM highest)
  // Per phase, in run order: its name, the lowest and the highest reserved peak of the orders
  // tried.
  struct PhaseSpread {
    std::string name;
    int64_t lowest_bytes = 0, highest_bytes = 0;
  };
  std::vector<PhaseSpread> phases;
};

// Searches orders of `recorded`'s train and evaluate steps (Note [orders of steps]).
OrderSearch search_step_orders(const sim::Trace& recorded, const OrderSearchOptions& options);

// `recorded` with its steps in `order`; throws std::invalid_argument (the refusal) when they
// cannot be reordered.
sim::Trace reorder_steps(const sim::Trace& recorded, const StepOrder& order);

// The run's own order of `recorded`'s steps (0, 1, ...); throws as reorder_steps.
StepOrder own_order(const sim::Trace& recorded);

}  // namespace oomguard::app
