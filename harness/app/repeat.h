#pragma once
// A repeat as an application step: N seeded runs, each its own process, `jobs` at a time,
// each run's report read into the summary. How a run is started and waited for is a seam
// (RunLauncher): processes here, a fake in the tests. On CUDA each running job has a GPU of
// its own (CUDA_VISIBLE_DEVICES), so that no two memory fractions share one. No Torch.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/repeat/summary.h"
#include "harness/usage_error.h"

namespace oomguard::app {

// `oomguard repeat`'s own options.
struct RepeatRequest {
  int64_t runs = 0;
  int64_t seed_start = 0;
  int64_t jobs = 1;
  std::string shard;  // "I/K"; empty: the whole range
  std::string report_file, junit_file, runs_dir;
  std::vector<std::string> run_args;  // passed to every `oomguard run`
  bool worst_case = false;            // then one `oomguard run --worst-case` with the same options
};

// The plan of `request`: its seeds (this shard's), and the run options every run gets, with
// each run's share of the cores when several run at once. `program` is how oomguard was
// invoked, for the reproduce commands. Throws UsageError naming a bad option.
repeat::Plan plan_repeat(const RepeatRequest& request, const std::string& program);

// On CUDA (asked for, or auto with a device) with more than one job, each running job takes a
// GPU of its own: the `device_count` visible ones as visible_gpus names them. Empty on CPU, on
// the Meta device or with one job. Throws UsageError when there are fewer GPUs than jobs, or for
// cuda:N.
std::vector<std::string> gpus_for_jobs(
    int64_t jobs, const std::string& device, int device_count, const char* cuda_visible_devices);

// One run as the pool starts it.
struct RepeatRun {
  uint64_t seed = 0;
  std::vector<std::string> argv;  // argv[0] the program, then `run --seed S --report ...`
  std::vector<std::string> env;   // set for this run only, "NAME=value"
  std::string log_path;           // its stdout and stderr
  std::string report_path;
};

// Starts runs and waits for them.
class RunLauncher {
 public:
  virtual ~RunLauncher() = default;
  // Starts `run`; returns an id for wait_any and stop.
  virtual int64_t start(const RepeatRun& run) = 0;
  // Waits until a started run ends: its id and exit code (128 + signal when killed).
  // std::nullopt when a signal interrupted the wait (then the caller looks at the interrupt
  // flag and waits again).
  virtual std::optional<std::pair<int64_t, int>> wait_any() = 0;
  // Asks a running run to end (SIGTERM): it stops at its next step and writes its report.
  virtual void stop(int64_t id) = 0;
};

// Runs `program` (this executable, /proc/self/exe) as a child process per run.
std::unique_ptr<RunLauncher> process_launcher();

struct RepeatPool {
  int64_t jobs = 1;
  // CUDA: the GPUs (CUDA_VISIBLE_DEVICES values) the jobs take, one running job each; empty on
  // CPU. At least `jobs` of them.
  std::vector<std::string> gpus;
  std::string dir;  // where the runs' reports and logs go
  // Called as each run ends, with its record (the summary's order is by seed).
  std::function<void(const repeat::Iteration&, size_t done, size_t total)> on_iteration;
  // Polled between runs: true stops starting runs and stops the running ones.
  std::function<bool()> interrupted;
};

// The plan's seeds run through `launcher`; returns the summary (by seed) of the runs that
// finished. Throws std::runtime_error when the launcher cannot start a run.
repeat::Summary run_repeat(const repeat::Plan& plan, const RepeatPool& pool, RunLauncher& launcher);

// One `oomguard run --worst-case` with the plan's run options (seed seed_start) through
// `launcher`: its bound per phase, outcome and reproduce command, as the summary records it
// (repeat::WorstCaseRun; its outcome kError when it left no report).
repeat::WorstCaseRun run_worst_case(
    const repeat::Plan& plan, const RepeatPool& pool, RunLauncher& launcher);

}  // namespace oomguard::app
