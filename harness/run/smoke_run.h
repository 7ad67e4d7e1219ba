#pragma once
// smoke_run: config -> model + data -> train -> evaluate -> generate -> RunReport.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <oomguard/memory/budgets.h>
#include <oomguard/memory/meter.h>
#include <oomguard/memory/phase_scope.h>
#include "harness/run/config.h"
#include "harness/report/run_report.h"
#include "harness/run/cuda_budget.h"

namespace oomguard::run {

struct PhaseReport {
  memory::PhaseMemory memory;
  memory::PhaseStatus status = memory::PhaseStatus::kNotRun;
  int64_t budget_bytes = 0;
  int64_t steps = 0;
  nlohmann::json results = nlohmann::json::object();  // the phase's own figures
  // What was live at the peak by tag, where the caller's meter sees tags (the run on CPU).
  std::optional<std::vector<memory::TagBytes>> live_at_peak;
};

// How far the phase's peak stayed below its budget, in percent of the budget (negative: over).
double headroom_percent(const PhaseReport& phase);

struct OomReport {
  std::string phase;
  int64_t requested_bytes = -1;  // -1: not known from the message
  std::string message;
};

// On the Meta device: the operator that could not run on shapes alone, and where.
struct UnsupportedReport {
  std::string phase;
  std::string op;  // "aten::nonzero"
  std::string message;
};

// Where the run ran and what it emulated: the report names both cards.
using DeviceReport = report::DeviceInfo;

struct RunReport {
  // kPass, kBudgetExceeded, kNearOom (allocator retries under --fail-on-retry), kOom,
  // kInterrupted, kDeviceError, kUnsupported: the worst of its phases
  memory::PhaseStatus outcome = memory::PhaseStatus::kPass;
  uint64_t seed = 0;
  DeviceReport device;
  int64_t capacity_bytes = 0;
  std::vector<PhaseReport> phases;
  std::optional<OomReport> oom;
  // A CUDA error other than out-of-memory that ended the run: its phase and message.
  std::optional<OomReport> device_error;
  // On the Meta device, an operator that needs values or has no Meta kernel ended the run.
  std::optional<UnsupportedReport> unsupported;
  // What was added to the config's (CPU) budgets for this device (CUDA: cuBLAS workspaces).
  std::vector<BudgetRule> budget_rules;
  Guards guards;
  nlohmann::json config;
  // `oomguard run --worst-case`: the report's worst_case section (app::worst_case_json); null
  // otherwise. Its seed null makes the report's seed null.
  nlohmann::json worst_case = nullptr;
};

struct RunOptions {
  uint64_t seed = 0;
  int64_t capacity_bytes = 0;  // emulated card; 0: none (the meter enforces it)
  DeviceReport device;         // where to run; type cuda runs the model on CUDA device 0
  // A phase in which the allocator had to free its cache and retry is a near-OOM: always
  // logged and reported; with this set it also fails the phase (status near_oom).
  bool fail_on_retry = false;
  // Added to every phase's budget from the config, each with its bytes (cuda_budget()).
  std::vector<BudgetRule> budget_rules;
  // Called after each phase ends, with its report (logging, test assertions).
  std::function<void(const PhaseReport&)> on_phase;
};

RunReport smoke_run(const RunConfig& config, memory::Meter& meter, const RunOptions& options);

// The run as its report (oomguard.report/1): report::to_json writes it, and what the run
// command added to the phases' results (live_at_peak) becomes typed.
report::RunRecord to_record(const RunReport& report);
// Writes atomically: a temporary file beside `path`, then a rename.
void write_report(const RunReport& report, const std::string& path);

}  // namespace oomguard::run
