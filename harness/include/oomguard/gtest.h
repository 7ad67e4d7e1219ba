#pragma once
// oomguard's GoogleTest layer: measure a phase of your own training code, assert its peak
// memory, keep budgets as data.
//
//   #include <oomguard/gtest.h>
//   TEST(CharLM, Memory) {
//     auto eval = oomguard::testing::measure("evaluate", [&] { evaluate(model, batches); });
//     EXPECT_PHASE_WITHIN_BUDGET(eval);            // budgets file, OOMGUARD_BUDGETS
//     EXPECT_PHASE_PEAK_BELOW(eval, "38MiB");      // or a literal limit
//   }
//
// Link oomguard::gtest_main (it installs the meter before anything else runs and brings
// main), or oomguard::gtest and call oomguard::memory::install_meter() first in your main.
//
// clang-format off
// The environment, as `oomguard run` reads it:
//
//   OOMGUARD_DEVICE        auto (default: CUDA when built with it and a device is visible),
//                          cpu, cuda, cuda:N (N > 0: gtest_main starts the binary again
//                          seeing the N-th visible device alone, device 0 to LibTorch and
//                          device(); a main of your own sets CUDA_VISIBLE_DEVICES instead),
//                          meta (shapes alone: device() is the Meta device, measure() counts
//                          its storages and, with a card, predicts it from them; make the
//                          model with make_on_device(), or move it with to(device()))
//   OOMGUARD_CARD          an emulated card: t4, a100-40, a100-80, h200
//                          (<oomguard/memory/cards.h>)
//   OOMGUARD_CAPACITY      or an emulated capacity ("12GiB")
//   OOMGUARD_ALLOC_CONF    the CUDA caching allocator's settings (gtest_main applies them
//                          before CUDA starts; on CPU and Meta the model predicts with them)
//   OOMGUARD_ALLOCATOR_MODEL
//                          cuda (default): on CPU and Meta, a card or capacity is predicted
//                          by the caching-allocator model (PhaseResult::predictions); none:
//                          the CPU (or Meta) bytes alone are held to the capacity
//   OOMGUARD_PREDICT       more cards and settings to predict alongside, ';'-separated:
//                          "t4 expandable_segments:True; a100-80; 12GiB"
//   OOMGUARD_ORDERS        on CPU and Meta with the allocator model, how many orders of each
//                          measure_steps() phase's steps are searched for the reserved peak
//                          (default 32; 0: none, and the process is not recorded for it)
//   OOMGUARD_RULES         the CPU-to-GPU rules the model applies: all (default), none, or
//                          names (<oomguard/sim/gpu_rules.h>: cublas_workspace,
//                          sdpa_attention, cpu_scratch)
//   OOMGUARD_SEED          the seed of every test; else a counter per test in
//                          OOMGUARD_SEED_COUNTER_DIR, so `ctest --repeat until-fail:N`
//                          tries a new seed each time
//   OOMGUARD_SEED_COUNTER_DIR
//                          where the per-test seed counters live (default ./oomguard-seeds;
//                          oomguard_add_memory_test sets one in the build folder)
//   OOMGUARD_THREADS       LibTorch's intra-op threads in a MemoryTest (default 2)
//   OOMGUARD_BUDGETS       the budgets file of EXPECT_PHASE_WITHIN_BUDGET
//   OOMGUARD_ACCEPT=1      write the peaks plus headroom into it instead of checking;
//                          =prune also removes the budgets of phases a test that passed
//                          no longer measures (without it they are listed)
//   OOMGUARD_TRACE         CPU and Meta: record every allocation of the binary into this
//                          trace (JSON Lines; phases named Suite.Name/phase) for oomguard
//                          replay and plot
//   OOMGUARD_NAME_OPERATORS
//                          1 (default): what is live outside every AllocTag is named by the
//                          operator or autograd node that allocated it ("untagged:
//                          aten::linear"); 0: "(untagged)"
//   OOMGUARD_REPORT_DIR    where each test's report (oomguard.report/1) is written, and
//                          <Suite.Name>.seed-<N>.json for a seed from the counter
// clang-format on
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <gtest/gtest.h>

#include <oomguard/memory/meter_stack.h>
#include <oomguard/memory/phase_scope.h>
#include <oomguard/meta/meta_device.h>
#include <oomguard/sim/gpu_rules.h>
#include <oomguard/sim/replay.h>

namespace oomguard::testing {

// The reserved peak of a measure_steps() phase over orders of its steps, for one card and
// setting (Note [orders of steps] in <oomguard/sim/step_orders.h>). Each step runs once, in the
// order given, recorded; the orders are replays of those recordings through the allocator
// model, so a step must allocate the same wherever it runs: it depends on its index alone
// (step(i) takes the i-th batch, whatever ran before). The first step keeps its place (it may
// make state, as an optimizer's), and what a step leaves for the next (its gradients) is
// freed by the step now after it.
struct StepOrders {
  int64_t orders_tried = 0;  // 0: none searched, and why_not says why
  std::string why_not;       // "OOMGUARD_ORDERS=0", "the phase ran out of memory", a refusal
  int64_t recorded_reserved_bytes = 0;  // the order run (0, 1, ...), replayed
  int64_t lowest_reserved_bytes = 0, highest_reserved_bytes = 0;
  std::vector<int> highest_order;  // the step indices in the order with the highest reserved
  std::string highest_oom;         // the card runs out in that order: LibTorch's message, else ""

  bool searched() const { return orders_tried > 0; }
};

// What the caching-allocator model predicts a CUDA run of the phase would do on one card (or
// capacity) with one allocator setting: on CPU or Meta with OOMGUARD_CARD or OOMGUARD_CAPACITY.
struct Prediction {
  std::string card;                  // the card, "" for a capacity alone
  int64_t capacity_bytes = 0;        // what the process may reserve on it
  std::string alloc_conf;            // the allocator settings, "" for LibTorch's defaults
  int64_t peak_allocated_bytes = 0;  // a CUDA run's max_memory_allocated, predicted
  int64_t peak_reserved_bytes = 0;   // max_memory_reserved: what must fit on the card
  int64_t num_alloc_retries = 0;     // the allocator would free its cache and retry
  int64_t largest_gap_bytes = 0;     // most reserved-but-unallocated memory (fragmentation)
  std::string oom;  // LibTorch's out-of-memory message when the card would run out, else ""
  // The CPU-to-GPU rules applied and their bytes in this phase's figures, e.g.
  // {"cublas_workspace", 17039360, "2 handles x 8,519,680 B (default for sm75)"},
  // {"sdpa_attention", 65536, "2 call(s): sm75 fp32: mem-efficient ... in place of the CPU's
  // math path; kept 64KiB for backward, left out 130.77MiB the CPU kernel allocated"}.
  std::vector<sim::RuleEffect> rules;
  // measure_steps() only: the phase's reserved peak over orders of its steps (OOMGUARD_ORDERS).
  StepOrders orders;

  std::string label;  // "t4", "t4 expandable_segments:True", "12GiB"

  bool fits() const { return oom.empty(); }
};

// The figures of one measured phase.
struct PhaseResult {
  std::string name;            // the phase, as given to measure()
  std::string test;            // "Suite.Name" of the test that measured it
  std::string meter;           // "cpu", "cuda" or "meta"
  std::string card;            // the emulated card, "" for none
  int64_t capacity_bytes = 0;  // the emulated capacity, 0 for none
  int64_t start_allocated_bytes = 0;
  int64_t peak_allocated_bytes = 0;
  int64_t end_allocated_bytes = 0;
  int64_t peak_reserved_bytes = -1;  // -1: not measured by this meter (CPU, Meta)
  int64_t num_alloc_retries = 0;     // the CUDA allocator freed its cache and retried
  double wall_seconds = 0.0;
  // What was live at the peak by tag (<oomguard/memory/alloc_site.h>), CPU and Meta: the five
  // largest tags, the rest; an allocation outside every tag under the operator that made it
  // ("untagged: aten::linear", "untagged: AddmmBackward0"), or "(untagged)" outside operators.
  std::vector<sim::TagBytes> live_at_peak;
  std::string oom;        // the out-of-memory message when the phase ran out, else ""
  std::string untracked;  // why the meter may have missed allocations, "" when it saw all
  // On CPU or Meta with a card or capacity: the model's predictions, the first for OOMGUARD_CARD or
  // OOMGUARD_CAPACITY with OOMGUARD_ALLOC_CONF (it stops the phase where the card would run
  // out, and the budgets' cuda:<card> entry is checked against it), then OOMGUARD_PREDICT's.
  // Empty when nothing is predicted (no card, CUDA, OOMGUARD_ALLOCATOR_MODEL=none).
  std::vector<Prediction> predictions;
  // measure_steps() only: the allocated bytes after each step (what it left behind).
  std::vector<int64_t> step_end_bytes;

  int64_t growth_bytes() const { return peak_allocated_bytes - start_allocated_bytes; }
};

// Runs `body` as the phase `name` of the current test and returns its figures. The peak is
// reset first; an out-of-memory error inside is caught, recorded in the result and reported
// as a test failure naming the phase. The figures also go into the test's XML properties
// ("oomguard.<name>.peak_allocated_bytes", ...) and its report in OOMGUARD_REPORT_DIR.
// On CUDA, and on CPU or Meta with the allocator model (a card or capacity), a test's first
// measure() starts from an emptied cache with both cuBLAS workspaces held, whatever ran before it.
PhaseResult measure(const std::string& name, const std::function<void()>& body);

// measure() of a loop: runs `step(0)` .. `step(steps - 1)` as the phase `name` and records
// the allocated bytes after each step in step_end_bytes, for EXPECT_PHASE_NO_STEP_GROWTH:
//     auto training = measure_steps("train", 5, [&](int) { train_step(model, batch); });
//     EXPECT_PHASE_NO_STEP_GROWTH(training, "16KiB");  // a leak per step fails here
// With the allocator model (CPU with a card or capacity) each prediction also carries the
// reserved peak over orders of the steps (Prediction::orders, OOMGUARD_ORDERS of them), for
// EXPECT_PHASE_FITS_CARD_IN_ANY_ORDER; the steps then must depend on their index alone.
PhaseResult measure_steps(
    const std::string& name, int steps, const std::function<void(int step)>& step);
// measure_steps() in a given order: runs `step(order[0])`, `step(order[1])`, ..., the order an
// EXPECT_PHASE_FITS_CARD_IN_ANY_ORDER failure names, to run it for real.
PhaseResult measure_steps(
    const std::string& name,
    const std::vector<int>& order,
    const std::function<void(int step)>& step);

// The indices of samples worst-first: by `lengths` (what a sample costs: its tokens, its
// pixels), longest first, ties in their given order. Batches made from samples in this order
// hold the longest samples first, so a smoke test that runs its first batches runs its worst:
//     for (size_t i : oomguard::testing::worst_first(lengths)) ordered.push_back(samples[i]);
inline std::vector<size_t> worst_first(const std::vector<int64_t>& lengths) {
  std::vector<size_t> order(lengths.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(
      order.begin(), order.end(), [&](size_t a, size_t b) { return lengths[a] > lengths[b]; });
  return order;
}
// `samples` worst-first by `length(sample)` (an integer), longest first, ties in their order:
//     auto batches = worst_first(samples, [](const Sample& s) { return s.tokens.size(); });
template <class Sample, class Length>
std::vector<Sample> worst_first(const std::vector<Sample>& samples, Length length) {
  std::vector<int64_t> lengths;
  lengths.reserve(samples.size());
  for (const Sample& sample : samples)
    lengths.push_back(static_cast<int64_t>(length(sample)));
  std::vector<Sample> ordered;
  ordered.reserve(samples.size());
  for (const size_t i : worst_first(lengths))
    ordered.push_back(samples[i]);
  return ordered;
}

// The figures of a phase measured elsewhere (a memory::PhaseScope in your own loop, or a
// smoke run's phase) as a PhaseResult of the current test, for the assertions below. Its
// live_at_peak is the tags of the site phase of that name (memory::set_alloc_phase).
PhaseResult phase_result(const memory::PhaseMemory& figures);

// The meter stack measure() uses (installed from the environment on first use).
memory::MeterStack& meters();
// Where tensors of a measured test belong: CUDA device 0 when the meter is CUDA (the device
// OOMGUARD_DEVICE named), the Meta device under OOMGUARD_DEVICE=meta, else CPU. A model made
// on the CPU (torch::nn's modules make their parameters there) moves with
// model->to(device()) on every device, Meta included (<oomguard/meta/meta_device.h>); made on
// the CPU first, it needs the CPU's memory for its parameters until it moves.
c10::Device device();
// The model `make()` returns (a torch::nn ModuleHolder, or a std::shared_ptr to a Module) made
// for device(), right on every device: under OOMGUARD_DEVICE=meta made within a
// meta::MakeOnMeta, so that no parameter is ever made on the CPU and a model of any size is
// made from its shapes; elsewhere made as usual; then moved with to(device()) on every device
// (the CPU-made tensors a constructor fills from lists, torch::tensor({...}), move then).
//     auto model = oomguard::testing::make_on_device([] { return Net(NetOptions(2048)); });
template <class Make>
auto make_on_device(Make&& make) {
  auto model = [&] {
    if (device().is_meta()) {
      const meta::MakeOnMeta on_meta;
      return make();
    }
    return make();
  }();
  model->to(device());
  return model;
}
// The thread count MemoryTest sets: OOMGUARD_THREADS, default 2. Throws
// std::invalid_argument naming the variable when it is not a whole number of 1 or more.
int test_threads();
// This test's seed (OOMGUARD_SEED, else this test's counter); also seeds LibTorch with it.
uint64_t seed_test();

// Assertion bodies for the macros below (GoogleTest predicate-formatters).
::testing::AssertionResult phase_peak_below(
    const char* phase_text,
    const char* limit_text,
    const PhaseResult& phase,
    const std::string& limit);
::testing::AssertionResult phase_within_budget(const char* phase_text, const PhaseResult& phase);
::testing::AssertionResult phase_growth_below(
    const char* phase_text,
    const char* limit_text,
    const PhaseResult& phase,
    const std::string& limit);
::testing::AssertionResult phase_no_near_oom(const char* phase_text, const PhaseResult& phase);
::testing::AssertionResult phase_reserved_below(
    const char* phase_text,
    const char* limit_text,
    const PhaseResult& phase,
    const std::string& limit);
::testing::AssertionResult phase_fits_card(
    const char* phase_text,
    const char* margin_text,
    const PhaseResult& phase,
    const std::string& margin);
::testing::AssertionResult phase_fits_card_in_any_order(
    const char* phase_text,
    const char* margin_text,
    const PhaseResult& phase,
    const std::string& margin);
::testing::AssertionResult phase_no_step_growth(
    const char* phase_text,
    const char* tolerance_text,
    const PhaseResult& phase,
    const std::string& tolerance);

// A fixture for memory tests: seeds LibTorch with seed_test() and sets LibTorch's thread
// count to OOMGUARD_THREADS (default 2), so figures do not depend on the machine's cores.
class MemoryTest : public ::testing::Test {
 protected:
  void SetUp() override;
};

}  // namespace oomguard::testing

// The phase's peak allocated bytes are at most `limit` ("38MiB").
#define EXPECT_PHASE_PEAK_BELOW(phase, limit) \
  EXPECT_PRED_FORMAT2(::oomguard::testing::phase_peak_below, phase, limit)
#define ASSERT_PHASE_PEAK_BELOW(phase, limit) \
  ASSERT_PRED_FORMAT2(::oomguard::testing::phase_peak_below, phase, limit)
// The phase's peak is within its budget in the budgets file (OOMGUARD_BUDGETS); with
// OOMGUARD_ACCEPT=1 the peak plus headroom is written there instead. The peak is the measured
// one, under the key "cpu", "cuda" or "meta" (":<card>" where the file has one); on CPU or Meta
// with a card or capacity, the predicted one, under "cuda:<card>" (or "cuda"), the key a CUDA
// run of the card is checked against.
#define EXPECT_PHASE_WITHIN_BUDGET(phase) \
  EXPECT_PRED_FORMAT1(::oomguard::testing::phase_within_budget, phase)
#define ASSERT_PHASE_WITHIN_BUDGET(phase) \
  ASSERT_PRED_FORMAT1(::oomguard::testing::phase_within_budget, phase)
// Peak minus start is at most `limit`: what the phase added on top of what it was given.
#define EXPECT_PHASE_GROWTH_BELOW(phase, limit) \
  EXPECT_PRED_FORMAT2(::oomguard::testing::phase_growth_below, phase, limit)
#define ASSERT_PHASE_GROWTH_BELOW(phase, limit) \
  ASSERT_PRED_FORMAT2(::oomguard::testing::phase_growth_below, phase, limit)
// The allocator never had to free its cache and retry (a near-OOM): measured on CUDA,
// predicted for every card and setting on CPU or Meta.
#define EXPECT_PHASE_NO_NEAR_OOM(phase) \
  EXPECT_PRED_FORMAT1(::oomguard::testing::phase_no_near_oom, phase)
#define ASSERT_PHASE_NO_NEAR_OOM(phase) \
  ASSERT_PRED_FORMAT1(::oomguard::testing::phase_no_near_oom, phase)
// What each step leaves behind does not grow: after the first step (which may create state,
// such as the optimizer's), the median step adds at most `tolerance` ("16KiB") to the
// allocated bytes (so one step that creates something once is no leak). A phase of measure_steps()
// with 2 steps or more; the failure names the phase, the growth per step and each step's change.
#define EXPECT_PHASE_NO_STEP_GROWTH(phase, tolerance) \
  EXPECT_PRED_FORMAT2(::oomguard::testing::phase_no_step_growth, phase, tolerance)
#define ASSERT_PHASE_NO_STEP_GROWTH(phase, tolerance) \
  ASSERT_PRED_FORMAT2(::oomguard::testing::phase_no_step_growth, phase, tolerance)
// The peak reserved bytes are at most `limit`: measured on CUDA; on CPU or Meta, predicted for
// every card and setting (it fails where nothing is predicted).
#define EXPECT_PHASE_RESERVED_BELOW(phase, limit) \
  EXPECT_PRED_FORMAT2(::oomguard::testing::phase_reserved_below, phase, limit)
#define ASSERT_PHASE_RESERVED_BELOW(phase, limit) \
  ASSERT_PRED_FORMAT2(::oomguard::testing::phase_reserved_below, phase, limit)
// The phase fits its card with `margin` to spare ("10%" of the capacity, or a size "1GiB"):
// no out-of-memory and peak reserved at most the capacity minus the margin; measured on CUDA
// with an emulated card, predicted for every card and setting on CPU or Meta, one verdict each.
#define EXPECT_PHASE_FITS_CARD(phase, margin) \
  EXPECT_PRED_FORMAT2(::oomguard::testing::phase_fits_card, phase, margin)
#define ASSERT_PHASE_FITS_CARD(phase, margin) \
  ASSERT_PRED_FORMAT2(::oomguard::testing::phase_fits_card, phase, margin)
// EXPECT_PHASE_FITS_CARD for every order of a measure_steps() phase's steps the layer searched
// (Prediction::orders): fails naming the worst order found, its reserved peak and how to run
// it; where no order was searched on CPU or Meta (OOMGUARD_ORDERS=0, steps that cannot be
// reordered), it fails saying why. On CUDA, where the allocator model is not used, no orders are
// searched: the steps ran in the order given and it asserts what EXPECT_PHASE_FITS_CARD does.
#define EXPECT_PHASE_FITS_CARD_IN_ANY_ORDER(phase, margin) \
  EXPECT_PRED_FORMAT2(::oomguard::testing::phase_fits_card_in_any_order, phase, margin)
#define ASSERT_PHASE_FITS_CARD_IN_ANY_ORDER(phase, margin) \
  ASSERT_PRED_FORMAT2(::oomguard::testing::phase_fits_card_in_any_order, phase, margin)
