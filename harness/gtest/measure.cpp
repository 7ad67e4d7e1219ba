#include <oomguard/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/ones.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>

#include <oomguard/memory/alloc_site.h>
#include <oomguard/memory/budgets.h>
#include <oomguard/memory/phase_scope.h>
#include <oomguard/memory/sizes.h>
#include <oomguard/sim/step_orders.h>
#include "harness/gtest/registry.h"

namespace oomguard::testing {

namespace {

// The site's phase name must outlive every allocation tagged with it: measure() names each
// phase "<test>/<phase>" once and keeps the string for the life of the process.
const char* interned_site_phase(const std::string& label) {
  static std::mutex mutex;
  static std::set<std::string> names;
  std::lock_guard<std::mutex> lock(mutex);
  return names.insert(label).first->c_str();
}

void record_properties(const PhaseResult& r) {
  const std::string prefix = "oomguard." + r.name + ".";
  ::testing::Test::RecordProperty(
      prefix + "start_allocated_bytes", std::to_string(r.start_allocated_bytes));
  ::testing::Test::RecordProperty(
      prefix + "peak_allocated_bytes", std::to_string(r.peak_allocated_bytes));
  ::testing::Test::RecordProperty(
      prefix + "end_allocated_bytes", std::to_string(r.end_allocated_bytes));
  if (r.peak_reserved_bytes >= 0)
    ::testing::Test::RecordProperty(
        prefix + "peak_reserved_bytes", std::to_string(r.peak_reserved_bytes));
  for (const Prediction& p : r.predictions) {
    const std::string predicted = prefix + "predicted." + p.label + ".";
    ::testing::Test::RecordProperty(
        predicted + "peak_allocated_bytes", std::to_string(p.peak_allocated_bytes));
    ::testing::Test::RecordProperty(
        predicted + "peak_reserved_bytes", std::to_string(p.peak_reserved_bytes));
    ::testing::Test::RecordProperty(predicted + "fits", p.fits() ? "true" : "false");
  }
  ::testing::Test::RecordProperty(
      prefix + "num_alloc_retries", std::to_string(r.num_alloc_retries));
  ::testing::Test::RecordProperty(prefix + "meter", r.meter);
}

}  // namespace

memory::MeterStack& meters() {
  if (memory::MeterStack* installed = memory::installed_meter())
    return *installed;
  return memory::install_meter(memory::meter_options_from_env());
}

c10::Device device() {
  const std::string& where = meters().device();
  if (where == "cuda")
    return c10::Device(c10::DeviceType::CUDA, 0);
  return c10::Device(where == "meta" ? c10::DeviceType::Meta : c10::DeviceType::CPU);
}

uint64_t seed_test() {
  uint64_t seed = 0;
  if (const char* fixed = std::getenv("OOMGUARD_SEED"); fixed != nullptr && *fixed != '\0') {
    try {
      seed = std::stoull(fixed);
    } catch (const std::exception&) {
      throw std::invalid_argument(std::string("OOMGUARD_SEED=") + fixed + ": expected a number");
    }
  } else {
    const char* dir = std::getenv("OOMGUARD_SEED_COUNTER_DIR");
    const std::string counters = dir != nullptr && *dir != '\0' ? dir : "oomguard-seeds";
    std::error_code ignored;
    std::filesystem::create_directories(counters, ignored);
    const std::string path = counters + "/" + detail::file_name_of(detail::current_test_name());
    std::ifstream(path) >> seed;
    std::ofstream(path, std::ios::trunc) << seed + 1 << "\n";
  }
  at::manual_seed(seed);
  const char* fixed = std::getenv("OOMGUARD_SEED");
  detail::record_seed(seed, /*drawn=*/fixed == nullptr || *fixed == '\0');
  std::cout << "[ oomguard ] " << detail::current_test_name() << " seed " << seed
            << " (OOMGUARD_SEED=" << seed << " runs it again)\n";
  ::testing::Test::RecordProperty("oomguard.seed", std::to_string(seed));
  return seed;
}

int test_threads() {
  const char* text = std::getenv("OOMGUARD_THREADS");
  if (text == nullptr || *text == '\0')
    return 2;
  const int threads = std::atoi(text);
  if (threads < 1 || std::to_string(threads) != text)
    throw std::invalid_argument(
        std::string("OOMGUARD_THREADS=") + text + ": expected a whole number, 1 or more");
  return threads;
}

void MemoryTest::SetUp() {
  at::set_num_threads(test_threads());
  seed_test();
}

namespace {

// What each target of the model predicted for the phase that just ended.
std::vector<Prediction> predictions(memory::MeterStack& stack) {
  std::vector<Prediction> out;
  const memory::ModelledMeter* model = stack.modelled();
  if (model == nullptr)
    return out;
  for (size_t i = 0; i < model->targets(); ++i) {
    const memory::ModelTarget& target = model->target(i);
    const memory::ModelFigures f = model->figures(i);
    Prediction& p = out.emplace_back();
    p.card = target.card;
    p.capacity_bytes = target.capacity_bytes;
    p.alloc_conf = target.alloc_conf;
    p.label = target.label();
    p.peak_allocated_bytes = f.peak_allocated_bytes;
    p.peak_reserved_bytes = f.peak_reserved_bytes;
    p.num_alloc_retries = f.num_alloc_retries;
    p.largest_gap_bytes = f.largest_gap_bytes;
    p.oom = f.oom;
    p.rules = f.rules;
  }
  return out;
}

// One line per phase on stdout, so a log shows the figures without opening a report:
// "[ oomguard ] Suite.Name train: peak 41.2MiB (start 2MiB); t4: fits, reserved 60MiB ...".
void print_phase(const PhaseResult& r) {
  std::string line = "[ oomguard ] " + r.test + " " + r.name + ": peak " +
                     memory::format_size(r.peak_allocated_bytes) + " (start " +
                     memory::format_size(r.start_allocated_bytes) + ", " + r.meter + ")";
  for (const Prediction& p : r.predictions) {
    line += "; " + p.label + ": " + (p.fits() ? "fits" : "OOM") + ", predicted allocated " +
            memory::format_size(p.peak_allocated_bytes) + ", reserved " +
            memory::format_size(p.peak_reserved_bytes);
    if (p.num_alloc_retries > 0)
      line += ", " + std::to_string(p.num_alloc_retries) + " retries";
    if (p.orders.searched())
      line += " (" + std::to_string(p.orders.orders_tried) + " orders of its steps: reserved " +
              memory::format_size(p.orders.lowest_reserved_bytes) + " .. " +
              memory::format_size(p.orders.highest_reserved_bytes) +
              (p.orders.highest_oom.empty() ? "" : ", one runs out") + ")";
  }
  if (r.meter == "cuda" && !r.step_end_bytes.empty())
    line += "; its steps ran in the order given (on CUDA no orders are searched)";
  std::cout << line << "\n";
}

PhaseResult result_of(const memory::PhaseMemory& figures, const char* site_phase) {
  memory::MeterStack& stack = meters();
  PhaseResult result;
  result.name = figures.name;
  result.test = detail::current_test_name();
  result.meter = stack.device();
  result.card = stack.options().card;
  result.capacity_bytes = stack.options().capacity_bytes;
  result.start_allocated_bytes = figures.start_allocated_bytes;
  result.peak_allocated_bytes = figures.peak_allocated_bytes;
  result.end_allocated_bytes = figures.end_allocated_bytes;
  result.peak_reserved_bytes = figures.peak_reserved_bytes;
  result.num_alloc_retries = figures.num_alloc_retries;
  result.wall_seconds = figures.wall_seconds;
  result.untracked = stack.coverage_gap();
  if (stack.live() != nullptr)
    result.live_at_peak = stack.live()->live_at_peak(site_phase, result.peak_allocated_bytes);
  result.predictions = predictions(stack);
  // A refusal the model met where nothing could throw (a workspace or a tensor an attention
  // kernel keeps, at the phase's end) is this phase's out-of-memory all the same.
  if (result.oom.empty() && !result.predictions.empty() && !result.predictions.front().oom.empty())
    result.oom = result.predictions.front().oom;
  if (!result.predictions.empty()) {
    // The measured figures stay the CPU's; what the model says is in the predictions.
    result.peak_reserved_bytes = -1;
    result.num_alloc_retries = 0;
  }
  return result;
}

// A phase that ran out of memory has its budget in the report all the same (no assertion
// will look it up: the phase has no figures to check).
void record_budget_of_oom(const PhaseResult& result) {
  const char* path = std::getenv("OOMGUARD_BUDGETS");
  if (path == nullptr || *path == '\0')
    return;
  try {
    const detail::BudgetCheck check = detail::budget_check(result);
    if (const auto budget = memory::load_budgets(path).find(check.key))
      detail::record_verdict(result, *budget, memory::PhaseStatus::kOom, &check);
  } catch (const std::exception&) {
    // A malformed budgets file: the budget assertions say why.
  }
}

void finish(const PhaseResult& result) {
  record_properties(result);
  detail::record_phase(result);
  print_phase(result);
  if (!result.oom.empty()) {
    record_budget_of_oom(result);
    // At the test's own line, not this file's: the phase is the user's.
    const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
    if (test != nullptr)
      ADD_FAILURE_AT(test->file(), test->line())
          << detail::oom_message(result) << detail::live_lines(result);
    else
      ADD_FAILURE() << detail::oom_message(result) << detail::live_lines(result);
  }
  if (!result.untracked.empty())
    ADD_FAILURE() << "phase " << result.name << " of " << result.test
                  << ": its figures may be low: " << result.untracked;
}

}  // namespace

PhaseResult phase_result(const memory::PhaseMemory& figures) {
  PhaseResult result = result_of(figures, figures.name.c_str());
  finish(result);
  return result;
}

namespace {

// Note [a test measures the same whatever ran before it]
// ctest gives each test a process of its own; a binary run whole, with a filter or with
// --gtest_repeat runs its tests one after another in one. On CUDA two things would carry over
// from the tests before: each cuBLAS handle takes a workspace at its first matrix product and
// keeps it for the life of the process (an evaluation-only test run first holds the forward
// thread's, after a training test it holds autograd's backward thread's too), and the caching
// allocator keeps the segments earlier tests freed (reserved). So before the first phase
// measure() runs in each test the device's cache is emptied, and before the first of the
// process one matrix product with a bias (cuBLASLt's path, where its workspace is its own),
// forward and backward, takes the handles' workspaces: every phase holds the two workspaces the
// budgets' cublas_workspace rule counts (sim::kTrainingCublasHandles), as every phase of a
// real run after its first training step does. With the allocator model (CPU with a card or
// capacity) the model sees the same product and does the same; on the CPU meter alone nothing
// carries over and nothing is done.
void take_cublas_workspaces(memory::MeterStack& stack) {
  const at::AutoGradMode grad(true);  // a test may measure under NoGradGuard
  const c10::InferenceMode not_inference(false);
  const at::TensorOptions on = at::TensorOptions().device(device()).dtype(at::kFloat);
  const at::Tensor a = at::ones({8, 8}, on).requires_grad_(true);
  try {
    // addmm forward; MmBackward0's mm on autograd's backward thread.
    at::addmm(at::ones({8}, on), a, at::ones({8, 8}, on)).sum().backward();
  } catch (const c10::OutOfMemoryError&) {
    // A card too small for a workspace: it was not taken, and the first product of a phase
    // that needs it asks for it again, in that phase.
  }
  // What the model refused here belongs to no phase (its targets would otherwise carry the
  // refusal into every phase as "ran out of memory earlier").
  if (memory::ModelledMeter* model = stack.modelled())
    model->forget_refusals();
}

// Cleared at each test's start (detail::device_not_ready).
std::mutex g_ready_mutex;
bool g_device_ready = false;
bool g_workspaces_taken = false;

void ready_device(memory::MeterStack& stack) {
  if (stack.device() != "cuda" && stack.modelled() == nullptr)
    return;
  detail::watch_test_starts();
  std::lock_guard<std::mutex> lock(g_ready_mutex);
  if (g_device_ready)
    return;
  if (!g_workspaces_taken)
    take_cublas_workspaces(stack);
  g_workspaces_taken = g_device_ready = true;
  stack.release_cache();
}

// Note [the orders of a measure_steps() phase]
// With the allocator model and OOMGUARD_ORDERS, the process is recorded step by step in memory
// from the meter's start (MeterStack::step_recorder); after a measure_steps() phase, its steps
// are put in other orders in that recording and replayed through each target's model
// (sim::search_step_orders: the first step keeps its place, what a step leaves for the next is
// freed by the step now after it). The replay of the order run is the figure the model gave
// the phase live, apart from the sdpa_attention rule's bytes, which replays leave out, and the
// CPU kernels' scratch that the cpu_scratch rule leaves out, which replays keep.
// The orders of the phase just measured for target `target`, `recorded` the process so far
// (null without OOMGUARD_ORDERS), `ran` the order its steps ran in.
StepOrders search_orders(
    memory::MeterStack& stack,
    size_t target,
    const sim::Trace* recorded,
    const char* site_phase,
    const std::vector<int>& ran,
    const PhaseResult& result) {
  StepOrders orders;
  if (recorded == nullptr) {
    orders.why_not = "OOMGUARD_ORDERS=0: the process is not recorded step by step";
    return orders;
  }
  if (!result.oom.empty() || !result.predictions[target].oom.empty()) {
    orders.why_not =
        result.predictions[target].oom.empty()
            ? "the phase stopped before its steps ended: " + result.predictions.front().label +
                  " ran out of memory"
            : "the phase ran out of memory in the order run";
    return orders;
  }
  const memory::ModelTarget& t = stack.modelled()->target(target);
  sim::StepOrderOptions o;
  o.orders = stack.options().step_orders;
  o.settings = t.settings;
  o.device = t.device;
  o.workspace_bytes = t.workspace.bytes_per_handle;
  sim::StepPhase& phase = o.phases.emplace_back();
  phase.name = site_phase;
  phase.fixed = 1;
  const sim::StepOrderSearch search = sim::search_step_orders(*recorded, o);
  if (!search.refused.empty()) {
    orders.why_not = search.refused;
    return orders;
  }
  orders.orders_tried = search.orders_tried;
  for (const auto& spread : search.phases)  // its last run's: the one searched
    if (spread.name == site_phase)
      orders.lowest_reserved_bytes = spread.lowest_bytes;
  const sim::OrderFigures& worst = search.highest_of_phase.front();
  orders.recorded_reserved_bytes = sim::last_run_reserved(search.recorded.result, site_phase);
  orders.highest_reserved_bytes = sim::last_run_reserved(worst.result, site_phase);
  for (const size_t place : worst.order.front())  // a place of the order run: its step
    orders.highest_order.push_back(ran.at(place));
  if (worst.result.oom)
    orders.highest_oom = worst.result.oom->info.message;
  return orders;
}

// The steps of a measure_steps() phase: the order they ran in, and the allocated bytes after
// each, filled inside the phase.
struct Steps {
  std::vector<int> order;
  std::vector<int64_t> ends;
};

// measure() and measure_steps(): `steps` (when given) has its ends filled inside the phase,
// which become the result's step_end_bytes before it is recorded, and the phase's steps are
// then searched in other orders (Note [the orders of a measure_steps() phase]).
PhaseResult measure_phase(
    const std::string& name, const std::function<void()>& body, Steps* steps) {
  memory::MeterStack& stack = meters();
  ready_device(stack);  // Note [a test measures the same whatever ran before it]
  // The site's phase is unique to this test and phase, so the tags at its peak are its own.
  const char* site_phase = interned_site_phase(detail::current_test_name() + "/" + name);
  memory::PhaseMemory figures;
  figures.name = name;
  std::string oom;
  const char* outer_phase = memory::alloc_site().phase;
  {
    memory::set_alloc_phase(site_phase);
    memory::PhaseScope scope(stack.meter(), figures);
    try {
      body();
    } catch (const c10::OutOfMemoryError& e) {
      oom = e.what_without_backtrace();
    }
    memory::set_alloc_step(-1);
  }
  memory::set_alloc_phase(outer_phase);
  PhaseResult result = result_of(figures, site_phase);
  if (!oom.empty())
    result.oom = oom;
  if (steps != nullptr) {
    result.step_end_bytes = steps->ends;
    std::optional<sim::Trace> recorded;
    if (memory::TraceRecorder* recorder = stack.step_recorder();
        recorder != nullptr && !result.predictions.empty())
      recorded = recorder->trace_so_far();  // once for every target
    for (size_t i = 0; i < result.predictions.size(); ++i)
      result.predictions[i].orders = search_orders(
          stack, i, recorded ? &*recorded : nullptr, site_phase, steps->order, result);
  }
  finish(result);
  return result;
}

}  // namespace

namespace detail {

void device_not_ready() {
  std::lock_guard<std::mutex> lock(g_ready_mutex);
  g_device_ready = false;
}

}  // namespace detail

PhaseResult measure(const std::string& name, const std::function<void()>& body) {
  return measure_phase(name, body, nullptr);
}

PhaseResult measure_steps(
    const std::string& name, int steps, const std::function<void(int step)>& step) {
  if (steps < 1)
    throw std::invalid_argument(
        "measure_steps(" + name + ", " + std::to_string(steps) + "): give 1 step or more");
  std::vector<int> order(static_cast<size_t>(steps));
  for (int i = 0; i < steps; ++i)
    order[static_cast<size_t>(i)] = i;
  return measure_steps(name, order, step);
}

PhaseResult measure_steps(
    const std::string& name,
    const std::vector<int>& order,
    const std::function<void(int step)>& step) {
  if (order.empty())
    throw std::invalid_argument("measure_steps(" + name + ", {}): give 1 step or more");
  Steps steps{order, {}};
  memory::Meter& meter = meters().meter();
  return measure_phase(
      name,
      [&] {
        for (size_t place = 0; place < order.size(); ++place) {
          memory::set_alloc_step(static_cast<int64_t>(place));  // what the orders move
          step(order[place]);
          steps.ends.push_back(meter.stats().allocated_bytes);
        }
      },
      &steps);
}

}  // namespace oomguard::testing
