#pragma once
// A repeat: the plan (seeds, shard, run options), one record per iteration, the statistics,
// and the JSON summary and JUnit XML written from them. Shard summaries merge into one.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include <oomguard/memory/budgets.h>
#include "harness/repeat/flake_stats.h"

namespace oomguard::repeat {

struct Plan {
  uint64_t seed_start = 0;
  int64_t runs = 0;  // N: seeds seed_start .. seed_start + N - 1, over all shards
  int64_t shard_index = 0;
  int64_t shard_count = 1;
  std::string program;                // how oomguard was invoked, for reproduce commands
  std::vector<std::string> run_args;  // the `run` options every iteration got

  // This shard's seeds: every shard_count-th seed, starting shard_index after seed_start.
  std::vector<uint64_t> seeds() const;
};

struct PhasePeak {
  std::string phase;
  memory::PhaseStatus status = memory::PhaseStatus::kPass;
  int64_t peak_bytes = 0;
  int64_t budget_bytes = 0;
};

struct Iteration {
  uint64_t seed = 0;
  // the report's outcome, or kError when the run left no report
  memory::PhaseStatus outcome = memory::PhaseStatus::kError;
  int exit_code = 0;
  double wall_seconds = 0.0;
  std::vector<PhasePeak> phases;
  std::string detail;  // the OOM's phase and message, or why there is no report

  bool passed() const { return outcome == memory::PhaseStatus::kPass; }
};

// `repeat --worst-case`: one `oomguard run --worst-case` with the same run options, whose
// allocated peaks bound every seed's (harness/app/worst_case.h).
struct WorstCaseRun {
  memory::PhaseStatus outcome = memory::PhaseStatus::kError;  // kError: it left no report
  int exit_code = 0;
  std::vector<std::pair<std::string, int64_t>> bounds;  // phase, peak allocated bytes
  std::string reproduce;                                // its inputs as a plain run
};

struct Summary {
  Plan plan;
  std::vector<Iteration> iterations;  // in seed order once complete
  std::optional<WorstCaseRun> worst_case;
};

// The record of one finished run from its report (null when the run wrote none). A report
// that cannot be read makes an error iteration whose detail says why.
Iteration iteration_from_report(
    uint64_t seed, int exit_code, double wall_seconds, const nlohmann::json& report);

// Each phase of the worst case: its bound, and the highest seed's peak (-1: no seed ran it).
struct WorstCaseComparison {
  std::string phase;
  int64_t bound_bytes = 0;
  int64_t highest_seed_bytes = -1;
  uint64_t highest_seed = 0;
};
std::vector<WorstCaseComparison> compare_with_worst_case(const Summary& summary);

// The command line that reruns `seed` alone.
std::string reproduce_command(const Plan& plan, uint64_t seed);

// The iteration that came closest to failing or failed worst: the worst outcome
// (memory::worst), then the highest peak/budget ratio. Null for an empty summary.
const Iteration* worst_iteration(const Summary& summary);

// A phase's peaks over the runs.
struct PhaseSpread {
  std::string phase;
  Spread spread;
};

// What a repeat says: how often it failed, with its 95% interval (and, with no failure, the
// rate it is below at 95%), the peaks' spread per phase, and the worst seed.
struct Statistics {
  int64_t runs = 0;
  int64_t failures = 0;
  double failure_rate = 0.0;
  Interval wilson_95;
  std::optional<double> upper_bound_95;  // only when no run failed
  std::vector<PhaseSpread> peaks;        // phases in run order
  std::optional<uint64_t> worst_seed;    // none for an empty summary
  std::string reproduce;                 // the worst seed's command; "" without one
};
Statistics statistics(const Summary& summary);
// The statistics object of the summary JSON.
nlohmann::json to_json(const Statistics& stats);

constexpr const char* kSummarySchema = "oomguard.repeat/1";

// Summary JSON ("schema": kSummarySchema): plan, iterations and statistics.
nlohmann::json to_json(const Summary& summary);
// Reads what to_json wrote; throws std::invalid_argument naming what is wrong.
Summary summary_from_json(const nlohmann::json& doc);

// One summary from shards of the same plan (same seed range and run options); throws
// std::invalid_argument on mismatched plans or a seed that appears twice.
Summary merge(const std::vector<Summary>& shards);

// JUnit XML: one test case per iteration, a <failure> with the reproduce command when it failed.
std::string to_junit(const Summary& summary);

}  // namespace oomguard::repeat
