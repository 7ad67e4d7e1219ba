#pragma once
// The worst case a run's data allows (`oomguard run --worst-case`): per phase, the inputs that
// reach the highest allocated peak any seed or data order can, computed from the samples'
// lengths, the collator and the guards instead of sampled by seeds. No Torch: the run gives
// the lengths, and runs the plan's orders (data.train_order, data.evaluate_order).
//
// Note [the worst case of a run]
// The bound rests on one assumption: the bytes a step allocates depend only on its shapes
// (batch, positions, generation length), never on token values, and do not shrink as a shape
// grows; on CPU also the same run.threads and LibTorch build, since CPU kernels size scratch
// buffers by thread count. Then, phase by phase:
// - train: a step after the first holds what every later step holds (AdamW's state exists
//   from the end of the first step on) plus its own batch's, so its peak is highest when its
//   batch holds the longest sample the collator lets through. Two steps reach it; more repeat
//   the second's shapes.
// - evaluate, guarded: nothing of a batch outlives it, so the highest batch is the peak.
//   Unguarded, every batch's logits and graph are kept to the end: the peak comes at the last
//   batch and grows with every batch's positions. Within one epoch each sample appears once,
//   so the best any order can do is one of the longest samples per batch, the longest in the
//   last (its transient is the largest): exact. Past one epoch the plan gives every batch the
//   longest sample, an upper bound no order may reach (`attained` false).
// - generate: its prompts are the first generate.prompts samples of at least prompt_length
//   bytes, in data order, so a data file fixes them; unguarded, generation runs until the
//   longest of their samples would end.
// The synthetic corpus is drawn from the seed, so its worst case covers every corpus the
// generator can draw: any sample may be the longest it draws (data.sample_lengths).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include <oomguard/sim/step_orders.h>

namespace oomguard::app {

// What the worst case depends on, read from the run's config and data.
struct WorstCaseData {
  // Each sample's bytes, in data order: a data file's, or the synthetic corpus the run's seed
  // draws (whose samples the plan may lengthen to longest_length).
  std::vector<int64_t> lengths;
  bool synthetic = true;
  int64_t longest_length = 0;        // synthetic: the longest sample the generator draws
  int64_t shortest_long_length = 0;  // synthetic: the shortest long-tail one (0: none drawn)
  uint64_t seed = 0;                 // the run's: its loaders' orders (evaluate's seed + 1)
  int64_t batch_size = 8;
  // The collator's cut: data.max_length with the truncate guard, model.max_seq_len without,
  // where it also pads each batch to its longest sample instead of to the cut.
  int64_t cut = 128;
  bool pad_to_longest = false;
  int64_t train_steps = 30;
  // Run every train step, not just the two that reach the allocated peak: the reserved
  // figures (allocator model, CUDA) depend on the whole phase.
  bool every_train_step = false;
  int64_t evaluate_batches = 8;
  int64_t prompts = 4;
  int64_t prompt_length = 32;
  bool cap_new_tokens = true;  // the max_new_tokens guard
  int64_t max_new_tokens = 64;
  int64_t max_seq_len = 1024;
};

// One step of a phase: the samples of its batch (generate: the prompts' samples) and the
// positions they make (a batch's T; generate: prompt and generated tokens).
struct WorstCaseStep {
  std::vector<size_t> samples;
  int64_t positions = 0;
};

struct WorstCasePhase {
  std::string name;
  std::vector<WorstCaseStep> steps;  // what the worst-case run gives the phase, step by step
  int64_t steps_configured = 0;      // what a plain run gives it
  bool attained = true;              // false: an upper bound no order of the data reaches
  std::string how;                   // why these inputs are the worst, one sentence
};

// The seed's own run with the fewest changes that put each phase at its worst: the longest
// sample into train's second batch and into every evaluation batch (the longest last), and,
// on the synthetic corpus, generate's prompts from longest samples.
struct WorstCasePlan {
  std::vector<int64_t> lengths;  // each sample's bytes in the inputs planned
  // A data file's: the orders the loaders take (data.train_order, data.evaluate_order). The
  // synthetic corpus keeps the seed's orders and lengthens samples instead.
  std::vector<size_t> train_order, evaluate_order;
  // Synthetic: the lengths it sets (data.sample_lengths), each one the generator draws.
  std::vector<std::pair<size_t, int64_t>> sample_lengths;
  int64_t train_steps = 0;  // the steps the worst-case run takes
  // With the reserved peak searched: the steps of a plain run, which the search's sequences
  // have (of the train_steps recorded); 0 otherwise.
  int64_t train_steps_searched = 0;
  std::vector<WorstCasePhase> phases;  // train, evaluate, generate
};

// The positions data::collate gives a batch of these samples of `lengths` bytes.
int64_t batch_positions(
    const std::vector<size_t>& samples,
    const std::vector<int64_t>& lengths,
    const WorstCaseData& data);

// The worst inputs of each phase. Throws std::invalid_argument when there are no samples.
WorstCasePlan plan_worst_case(const WorstCaseData& data);

// The report's `worst_case` section (oomguard.report/1): `seed` (the seed the inputs named
// were drawn with; null for a data file's, whose orders are given in full), `inputs`,
// `assumption`, `allocated`, `reserved` (what the reserved figures are: `reserved_json`, or
// null where the run has none), per phase the steps (sample ids, their lengths, positions)
// and `reproduce`.
nlohmann::json worst_case_json(
    const WorstCasePlan& plan,
    const WorstCaseData& data,
    const std::string& data_source,
    const std::string& reproduce,
    const nlohmann::json& reserved);

// The `reserved` section: with a search (Note [orders of steps]) the spread of the whole
// run's reserved peak over the orders tried, per phase, the highest order's steps and the
// command that reproduces it; without one (CUDA, or the steps could not be reordered), what
// the figures are and why no order was searched.
nlohmann::json reserved_json(
    const sim::StepOrderSearch* search,
    const std::string& reproduce_highest,
    const std::string& why_not);

// The --set options that make a plain run take the plan's inputs; with `train` and
// `evaluate` (indices of the plan's steps, as sim::StepOrder gives them), its steps in that
// order.
std::vector<std::string> worst_case_sets(
    const WorstCasePlan& plan,
    const std::vector<size_t>* train = nullptr,
    const std::vector<size_t>* evaluate = nullptr);

}  // namespace oomguard::app
