#include "harness/cli/repeat_command.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "harness/cli/exit_codes.h"
#include "harness/atomic_file.h"
#include "harness/app/inputs.h"
#include "harness/app/repeat.h"
#include "harness/cli/run_command.h"
#include "harness/interrupt.h"
#include <oomguard/memory/cuda_meter.h>
#include <oomguard/memory/sizes.h>
#include "harness/repeat/summary.h"

namespace oomguard::cli {
namespace {

namespace fs = std::filesystem;
using repeat::Iteration;
using repeat::Summary;

// "train 78.2MiB evaluate 17.5MiB generate 13.3MiB"
std::string peaks_line(const Iteration& it) {
  std::string line;
  for (const auto& p : it.phases)
    line += (line.empty() ? "" : " ") + p.phase + " " + memory::format_size(p.peak_bytes);
  return line;
}

std::string percent(double x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f%%", 100.0 * x);
  return buf;
}

// The table, the failure rate and its interval, the peak spread and the worst seed.
void print_summary(const Summary& summary) {
  std::vector<std::string> phases;
  for (const auto& it : summary.iterations)
    for (const auto& p : it.phases)
      if (std::find(phases.begin(), phases.end(), p.phase) == phases.end())
        phases.push_back(p.phase);
  std::printf("%-8s %-16s", "seed", "outcome");
  for (const auto& name : phases)
    std::printf(" %12s", name.c_str());
  std::printf(" %8s\n", "seconds");
  for (const auto& it : summary.iterations) {
    std::printf(
        "%-8llu %-16s", static_cast<unsigned long long>(it.seed), memory::to_string(it.outcome));
    for (const auto& name : phases) {
      const auto p = std::find_if(
          it.phases.begin(), it.phases.end(), [&](const auto& q) { return q.phase == name; });
      std::printf(" %12s", p == it.phases.end() ? "-" : memory::format_size(p->peak_bytes).c_str());
    }
    std::printf(" %8.2f\n", it.wall_seconds);
  }
  const repeat::Statistics stats = repeat::statistics(summary);
  std::printf(
      "failures: %lld/%lld (%s), 95%% Wilson interval %s .. %s\n",
      static_cast<long long>(stats.failures),
      static_cast<long long>(stats.runs),
      percent(stats.failure_rate).c_str(),
      percent(stats.wilson_95.lo).c_str(),
      percent(stats.wilson_95.hi).c_str());
  if (stats.upper_bound_95)
    std::printf(
        "no failure in %lld runs: the failure rate is below %s at 95%% confidence\n",
        static_cast<long long>(stats.runs),
        percent(*stats.upper_bound_95).c_str());
  std::printf("%-10s %12s %12s %12s\n", "peak", "min", "median", "max");
  for (const repeat::PhaseSpread& p : stats.peaks)
    std::printf(
        "%-10s %12s %12s %12s\n",
        p.phase.c_str(),
        memory::format_size(p.spread.min).c_str(),
        memory::format_size(static_cast<int64_t>(p.spread.median)).c_str(),
        memory::format_size(p.spread.max).c_str());
  if (const Iteration* worst = repeat::worst_iteration(summary)) {
    std::printf(
        "%s %llu (%s%s)\nreproduce: %s\n",
        worst->passed() ? "closest to a budget: seed" : "worst seed:",
        static_cast<unsigned long long>(worst->seed),
        memory::to_string(worst->outcome),
        worst->detail.empty() ? "" : (": " + worst->detail.substr(0, 160)).c_str(),
        stats.reproduce.c_str());
  }
}

// `repeat --worst-case`: each phase's highest seed against the worst case's bound.
void print_worst_case(const Summary& summary) {
  if (!summary.worst_case)
    return;
  const repeat::WorstCaseRun& w = *summary.worst_case;
  std::printf(
      "worst case (one oomguard run --worst-case, the same options): %s, exit %d\n",
      memory::to_string(w.outcome),
      w.exit_code);
  const auto compared = repeat::compare_with_worst_case(summary);
  for (const repeat::WorstCaseComparison& c : compared) {
    if (w.outcome == memory::PhaseStatus::kOom && &c == &compared.back()) {
      std::printf(
          "%-10s the worst case runs out of memory here, at %s allocated; the highest seed "
          "%s\n",
          c.phase.c_str(),
          memory::format_size(c.bound_bytes).c_str(),
          c.highest_seed_bytes < 0 ? "-" : memory::format_size(c.highest_seed_bytes).c_str());
      continue;
    }
    if (c.highest_seed_bytes < 0) {
      std::printf(
          "%-10s bound %12s, no seed reached it\n",
          c.phase.c_str(),
          memory::format_size(c.bound_bytes).c_str());
      continue;
    }
    std::printf(
        "%-10s bound %12s, highest seed %12s (seed %llu, %s of the bound)\n",
        c.phase.c_str(),
        memory::format_size(c.bound_bytes).c_str(),
        memory::format_size(c.highest_seed_bytes).c_str(),
        static_cast<unsigned long long>(c.highest_seed),
        percent(static_cast<double>(c.highest_seed_bytes) / static_cast<double>(c.bound_bytes))
            .c_str());
  }
  if (!w.reproduce.empty())
    std::printf("worst case's inputs: %s\n", w.reproduce.c_str());
}

int finish(const Summary& summary, const std::string& report_file, const std::string& junit_file) {
  print_summary(summary);
  print_worst_case(summary);
  if (!report_file.empty())
    write_file_atomically(report_file, repeat::to_json(summary).dump(2) + "\n");
  if (!junit_file.empty())
    write_file_atomically(junit_file, repeat::to_junit(summary));
  const bool all_passed =
      std::all_of(summary.iterations.begin(), summary.iterations.end(), [](const auto& it) {
        return it.passed();
      });
  return all_passed ? kExitPass : kExitBudget;
}

}  // namespace

int repeat_command(const RepeatArgs& args, const std::string& program) {
  const repeat::Plan plan = app::plan_repeat(args, program);
  const RunArgs run_args = parse_run_args(plan.run_args);
  app::RepeatPool pool;
  pool.jobs = args.jobs;
  pool.gpus = app::gpus_for_jobs(
      args.jobs,
      app::asked_device(run_args.device),
      memory::cuda_meter_built() ? memory::cuda_device_count() : 0,
      std::getenv("CUDA_VISIBLE_DEVICES"));
  app::resolve_run(run_args);  // everything the runs will be given is checked before any starts
  app::check_writable(args.report_file, "--report");
  app::check_writable(args.junit_file, "--junit");

  const bool keep = !args.runs_dir.empty();
  fs::path dir = args.runs_dir;
  if (keep) {
    fs::create_directories(dir);
  } else {
    std::string tmpl = (fs::temp_directory_path() / "oomguard-repeat-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr)
      throw std::runtime_error("repeat: cannot create a temporary directory");
    dir = tmpl;
  }
  pool.dir = dir.string();

  const std::vector<uint64_t> seeds = plan.seeds();
  std::printf(
      "oomguard repeat: %zu runs (seeds %llu..%llu%s), %lld at a time%s\n",
      seeds.size(),
      static_cast<unsigned long long>(plan.seed_start),
      static_cast<unsigned long long>(plan.seed_start + static_cast<uint64_t>(plan.runs) - 1),
      args.shard.empty() ? "" : (", shard " + args.shard).c_str(),
      static_cast<long long>(args.jobs),
      pool.gpus.empty() ? "" : ", a GPU each");
  std::fflush(stdout);
  pool.on_iteration = [](const Iteration& it, size_t done, size_t total) {
    std::printf(
        "[%zu/%zu] seed %llu: %s  %s  %.1f s\n",
        done,
        total,
        static_cast<unsigned long long>(it.seed),
        memory::to_string(it.outcome),
        peaks_line(it).c_str(),
        it.wall_seconds);
    std::fflush(stdout);
  };
  // Interrupted: no new runs; the running ones are told (SIGTERM) and end with their reports.
  install_interrupt_handlers();
  pool.interrupted = [] { return interrupt_requested(); };
  const std::unique_ptr<app::RunLauncher> launcher = app::process_launcher();
  Summary summary = app::run_repeat(plan, pool, *launcher);
  if (args.worst_case && !interrupt_requested()) {
    std::printf("worst case: one oomguard run --worst-case with the same options\n");
    std::fflush(stdout);
    summary.worst_case = app::run_worst_case(plan, pool, *launcher);
  }
  if (!keep)
    fs::remove_all(dir);
  const int code = finish(summary, args.report_file, args.junit_file);
  if (interrupt_requested()) {
    std::printf("interrupted: %zu of %zu runs finished\n", summary.iterations.size(), seeds.size());
    return kExitInterrupted;
  }
  return code;
}

int merge_command(const MergeArgs& args) {
  std::vector<Summary> shards;
  for (const auto& file : args.files) {
    const nlohmann::json doc = app::read_json_file(file);
    if (doc.is_null())
      throw UsageError("merge: " + file + ": cannot be read as JSON");
    try {
      shards.push_back(repeat::summary_from_json(doc));
    } catch (const std::invalid_argument& e) {
      throw UsageError("merge: " + file + ": " + e.what());
    }
  }
  app::check_writable(args.report_file, "--report");
  app::check_writable(args.junit_file, "--junit");
  const Summary merged = app::given([&] { return repeat::merge(shards); });
  const auto planned = static_cast<size_t>(merged.plan.runs);
  if (merged.iterations.size() != planned)
    std::printf("merge: %zu of %zu planned seeds present\n", merged.iterations.size(), planned);
  return finish(merged, args.report_file, args.junit_file);
}

}  // namespace oomguard::cli
