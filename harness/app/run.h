#pragma once
// The run as an application step, apart from the command line: check what was asked
// (resolve_run), then run it with its meters and observers and write what it was asked to
// write (execute_run). Progress goes to the log; nothing is printed to stdout here.
// run.cpp holds these two; the run's parts are units of their own beside it: the device
// (run_device.h), a CUDA run's allocator settings (run_alloc_conf.h), the snapshot of a CPU run
// (run_snapshot.h), the worst case (run_worst_case.h), and what the run logs and writes
// (run_outputs.h).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "harness/app/run_alloc_conf.h"
#include "harness/app/run_snapshot.h"
#include "harness/app/worst_case.h"
#include "harness/run/config.h"
#include "harness/memory/start_again.h"
#include "harness/run/smoke_run.h"
#include <oomguard/memory/device_kind.h>
#include <oomguard/memory/modelled_meter.h>
#include <oomguard/sim/caching_allocator.h>
#include <oomguard/sim/gpu_rules.h>

namespace oomguard::app {

// What a run is asked to do: `oomguard run`'s options.
struct RunRequest {
  std::string config_file, report_file, capacity, card,
      device;                            // device "": OOMGUARD_DEVICE or auto
  std::string trace_file;                // record the CPU meter's allocations here
  std::string snapshot_file;             // the run as a PyTorch memory snapshot
  std::string allocator_model = "none";  // none, or cuda: the caching-allocator model
  bool allocator_model_given = false;    // given: else on the Meta device it is cuda
  std::string rules = "all";             // the model's CPU-to-GPU rules (sim::GpuRules)
  std::vector<std::string> sets, disabled_guards;
  int64_t seed = 0;
  bool print_config = false;
  bool print_budgets = false;
  bool fail_on_retry = false;
  // --worst-case: each phase on the worst inputs its data allows (app/worst_case.h).
  bool worst_case = false;
  // --orders: the orders of the steps it replays through the allocator model.
  int64_t orders = 128;
  bool orders_given = false;
  // The process's own arguments: a run that must put allocator settings into the environment
  // before LibTorch starts re-executes itself with them.
  char** argv = nullptr;
};

// A request checked and completed: everything the run needs, nothing left to refuse.
struct ResolvedRun {
  run::RunConfig config;
  int64_t capacity_bytes = 0;                            // emulated card; 0: none
  memory::DeviceKind device = memory::DeviceKind::kCpu;  // auto resolved
  // cuda:N (N > 0): what narrows the process to that device (memory::cuda_device_settings);
  // empty for none, or in the process so narrowed.
  memory::EnvSettings narrowing;
  EnvAllocConf env_alloc_conf;  // CUDA: read once, checked here, applied by execute_run
  sim::AllocatorSettings cuda_alloc_settings;  // CUDA: what those (or memory.alloc_conf) ask
  // --allocator-model cuda: the card (or capacity) and settings (memory.alloc_conf) the model
  // predicts, with its rules (cuBLAS workspaces).
  std::optional<memory::ModelTarget> model;
  // --snapshot on CPU: what its replay of the run's trace takes (run_snapshot.h): the settings
  // of memory.alloc_conf, the cuBLAS workspaces it adds at the trace's gemm events (--rules).
  std::optional<SnapshotReplay> snapshot;
  // --worst-case: the plan (whose orders and steps `config` now takes) and what it rests on.
  struct WorstCase {
    WorstCasePlan plan;
    WorstCaseData data;
    std::string inputs;  // the inputs in words, for the report
  };
  std::optional<WorstCase> worst_case;
};

// Checks everything the request gives (config, sets, guards, card, capacity, device, rules)
// and builds the run; throws UsageError naming the bad input.
ResolvedRun resolve_run(const RunRequest& request);

// The guards switched off, "a,b" or "none".
std::string disabled_guards(const run::Guards& guards);

// The command that runs the worst case's inputs as a plain run: the request's options with the
// plan's --set options (the whole train phase, not just its two steps); with `train` and
// `evaluate` (an order of the plan's steps, sim::StepOrder), its steps in that order.
std::string worst_case_reproduce(
    const RunRequest& request,
    const ResolvedRun& resolved,
    const std::vector<size_t>* train = nullptr,
    const std::vector<size_t>* evaluate = nullptr);

// Runs the resolved request: the device prepared (on CUDA the process may start again with
// the allocator settings or the card's cuBLAS workspaces), the meters, the phases, then the
// report, trace and snapshot. `on_report` is called once the report is written, before the
// trace and snapshot are. An output that cannot be written after the run is logged as an
// error and left out; the returned report's outcome is the run's either way.
run::RunReport execute_run(
    const RunRequest& request,
    const ResolvedRun& resolved,
    const std::function<void(const run::RunReport&)>& on_report);

}  // namespace oomguard::app
