#pragma once
// `oomguard run`: its options, their validation, and the run itself.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/cli/inputs.h"
#include "harness/run/config.h"
#include <oomguard/memory/modelled_meter.h>
#include <oomguard/sim/caching_allocator.h>
#include <oomguard/sim/gpu_rules.h>

namespace CLI {
class App;
}  // namespace CLI

namespace oomguard::cli {

struct RunArgs {
  std::string config_file, report_file, capacity, card,
      device;                            // device "": OOMGUARD_DEVICE or auto
  std::string trace_file;                // record the CPU meter's allocations here
  std::string snapshot_file;             // the run as a PyTorch memory snapshot (CPU runs)
  std::string allocator_model = "none";  // none, or cuda: the caching-allocator model
  std::string rules = "all";             // the model's CPU-to-GPU rules (sim::GpuRules)
  std::vector<std::string> sets, disabled_guards;
  int64_t seed = 0;
  bool print_config = false;
  bool print_budgets = false;
  bool fail_on_retry = false;
  // The process's own arguments: a run that must put memory.alloc_conf into the environment
  // before LibTorch starts re-executes itself with them.
  char** argv = nullptr;
};

// Declares run's options on `app` (the run subcommand, or repeat's parser for its run options).
// Declares `oomguard run`'s options on `app`, filling `args` (harness/cli/main.cpp, the one
// file that compiles CLI11).
void add_run_options(CLI::App& app, RunArgs& args);

struct ResolvedRun {
  run::RunConfig config;
  int64_t capacity_bytes = 0;  // emulated card; 0: none
  std::string device;          // cpu or cuda (auto resolved)
  // --allocator-model cuda: the card (or capacity) and settings (memory.alloc_conf) the model
  // predicts, with its rules (cuBLAS workspaces).
  std::optional<memory::ModelTarget> model;
  // --snapshot: the settings its replay uses (memory.alloc_conf), and the cuBLAS workspaces
  // it adds at the trace's gemm events (--rules).
  std::optional<sim::AllocatorSettings> snapshot_settings;
  sim::CublasWorkspace snapshot_workspace;
};

// Checks everything the user gave (config, sets, guards, card, capacity, device) and builds
// the run; throws UsageError naming the bad input.
ResolvedRun resolve_run(const RunArgs& args);

// The whole run: returns the exit code.
int run_command(const RunArgs& args);

}  // namespace oomguard::cli
