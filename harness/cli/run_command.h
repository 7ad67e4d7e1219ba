#pragma once
// `oomguard run`: its options, their validation, and the run itself.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

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
// --rules (run, replay): the CPU-to-GPU rules; throws run::ConfigError naming the option.
sim::GpuRules rules_option(const std::string& text);
// The device asked for: `option` (--device) when given, else OOMGUARD_DEVICE, else "auto".
std::string asked_device(const std::string& option);

// Checks everything the user gave (config, sets, guards, card, capacity, device) and builds
// the run; throws run::ConfigError or std::invalid_argument naming the bad input.
ResolvedRun resolve_run(const RunArgs& args);

// `--capacity TEXT` of run and replay: a size above 0 bytes (parse_size's units); throws
// run::ConfigError naming the option otherwise (0 would silently mean no card at all).
int64_t parse_capacity(const std::string& text);

// Throws run::ConfigError naming `option` when `path` cannot be written (checked by writing
// and removing path + ".tmp", the name write_file_atomically uses). An empty path passes.
void check_writable(const std::string& path, const char* option);

// The whole run: returns the exit code.
int run_command(const RunArgs& args);

}  // namespace oomguard::cli
