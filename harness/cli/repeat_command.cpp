#include "harness/cli/repeat_command.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "harness/cli/exit_codes.h"
#include "harness/atomic_file.h"
#include "harness/app/inputs.h"
#include "harness/cli/run_command.h"
#include "harness/interrupt.h"
#include <oomguard/memory/cuda_meter.h>
#include <oomguard/memory/sizes.h>
#include "harness/repeat/flake_stats.h"
#include "harness/repeat/summary.h"

extern char** environ;

namespace oomguard::cli {
namespace {

namespace fs = std::filesystem;
using repeat::Iteration;
using repeat::Summary;

struct Child {
  uint64_t seed;
  std::chrono::steady_clock::time_point start;
};

void parse_shard(const std::string& text, repeat::Plan& plan) {
  const auto slash = text.find('/');
  try {
    if (slash == std::string::npos)
      throw std::invalid_argument("no slash");
    size_t used_i = 0, used_k = 0;
    plan.shard_index = std::stoll(text.substr(0, slash), &used_i);
    plan.shard_count = std::stoll(text.substr(slash + 1), &used_k);
    if (used_i != slash || used_k != text.size() - slash - 1)
      throw std::invalid_argument("trailing characters");
  } catch (const std::exception&) {
    throw UsageError("--shard " + text + ": expected I/K, e.g. 0/2 (I counts from 0)");
  }
  if (plan.shard_count < 1 || plan.shard_index < 0 || plan.shard_index >= plan.shard_count)
    throw UsageError("--shard " + text + ": need K >= 1 and 0 <= I < K");
}

pid_t spawn_run(const std::vector<std::string>& argv, const fs::path& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<char*> cargv;
  for (const auto& a : argv)
    cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0)
    throw std::runtime_error("repeat: cannot start a run: " + std::string(std::strerror(rc)));
  return pid;
}

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in)
    return nullptr;
  auto doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return doc.is_discarded() ? nlohmann::json(nullptr) : doc;
}

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
  const nlohmann::json stats = repeat::statistics(summary);
  const auto n = stats.at("runs").get<int64_t>(), k = stats.at("failures").get<int64_t>();
  const auto wilson = stats.at("wilson_95");
  std::printf(
      "failures: %lld/%lld (%s), 95%% Wilson interval %s .. %s\n",
      static_cast<long long>(k),
      static_cast<long long>(n),
      percent(stats.at("failure_rate").get<double>()).c_str(),
      percent(wilson[0].get<double>()).c_str(),
      percent(wilson[1].get<double>()).c_str());
  if (!stats.at("upper_bound_95").is_null())
    std::printf(
        "no failure in %lld runs: the failure rate is below %s at 95%% confidence\n",
        static_cast<long long>(n),
        percent(stats.at("upper_bound_95").get<double>()).c_str());
  std::printf("%-10s %12s %12s %12s\n", "peak", "min", "median", "max");
  for (const auto& p : stats.at("peaks"))
    std::printf(
        "%-10s %12s %12s %12s\n",
        p.at("phase").get<std::string>().c_str(),
        memory::format_size(p.at("min_bytes").get<int64_t>()).c_str(),
        memory::format_size(static_cast<int64_t>(p.at("median_bytes").get<double>())).c_str(),
        memory::format_size(p.at("max_bytes").get<int64_t>()).c_str());
  if (const Iteration* worst = repeat::worst_iteration(summary)) {
    std::printf(
        "%s %llu (%s%s)\nreproduce: %s\n",
        worst->passed() ? "closest to a budget: seed" : "worst seed:",
        static_cast<unsigned long long>(worst->seed),
        memory::to_string(worst->outcome),
        worst->detail.empty() ? "" : (": " + worst->detail.substr(0, 160)).c_str(),
        stats.at("reproduce").get<std::string>().c_str());
  }
}

int finish(const Summary& summary, const std::string& report_file, const std::string& junit_file) {
  print_summary(summary);
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
  if (args.runs < 1)
    throw UsageError("repeat -n " + std::to_string(args.runs) + ": need at least 1 run");
  if (args.jobs < 1)
    throw UsageError("repeat --jobs " + std::to_string(args.jobs) + ": need at least 1");
  repeat::Plan plan;
  plan.seed_start = static_cast<uint64_t>(args.seed_start);
  plan.runs = args.runs;
  plan.program = program;
  plan.run_args = args.run_args;
  if (!args.shard.empty())
    parse_shard(args.shard, plan);
  if (plan.seed_start + static_cast<uint64_t>(plan.runs) - 1 > 4294967295ull)
    throw UsageError("repeat: seeds past 4294967295; lower --seed-start or -n");
  // Parallel runs share the cores: each gets its share, and the reproduce command says so.
  const bool threads_given =
      std::any_of(plan.run_args.begin(), plan.run_args.end(), [](const std::string& a) {
        return a.rfind("run.threads=", 0) == 0;
      });
  if (args.jobs > 1 && !threads_given) {
    const auto cores = static_cast<int64_t>(std::max(1u, std::thread::hardware_concurrency()));
    plan.run_args.push_back("--set");
    plan.run_args.push_back(
        "run.threads=" + std::to_string(std::max<int64_t>(1, cores / args.jobs)));
  }
  const RunArgs run_args = parse_run_args(plan.run_args);
  // On CUDA (asked for, or auto with a device) parallel runs would share one GPU; refused
  // before the device is looked for, so that the refusal reads the same on every machine.
  const std::string device = app::asked_device(run_args.device);
  if (args.jobs > 1 && (device == "cuda" || (device == "auto" && memory::cuda_meter_built() &&
                                             memory::cuda_device_count() > 0)))
    throw UsageError(
        "repeat --jobs " + std::to_string(args.jobs) +
        " on CUDA: the runs would share one GPU, each capped at the emulated card by a memory "
        "fraction of its own, so together they could hold more than the card and each sees "
        "the others' memory; use --jobs 1 on a GPU");
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

  const std::vector<uint64_t> seeds = plan.seeds();
  std::printf(
      "oomguard repeat: %zu runs (seeds %llu..%llu%s), %lld at a time\n",
      seeds.size(),
      static_cast<unsigned long long>(plan.seed_start),
      static_cast<unsigned long long>(plan.seed_start + static_cast<uint64_t>(plan.runs) - 1),
      args.shard.empty() ? "" : (", shard " + args.shard).c_str(),
      static_cast<long long>(args.jobs));
  std::fflush(stdout);
  Summary summary;
  summary.plan = plan;
  std::map<pid_t, Child> running;
  size_t next = 0;
  // Interrupted: no new runs; the running ones are told (SIGTERM) and end with their reports.
  install_interrupt_handlers();
  bool told = false;
  while ((next < seeds.size() && !interrupt_requested()) || !running.empty()) {
    while (!interrupt_requested() && next < seeds.size() &&
           static_cast<int64_t>(running.size()) < args.jobs) {
      const uint64_t seed = seeds[next++];
      const std::string stem = "seed-" + std::to_string(seed);
      fs::remove(dir / (stem + ".json"));
      std::vector<std::string> argv = {
          program,
          "run",
          "--seed",
          std::to_string(seed),
          "--report",
          (dir / (stem + ".json")).string()};
      argv.insert(argv.end(), plan.run_args.begin(), plan.run_args.end());
      running[spawn_run(argv, dir / (stem + ".log"))] = {seed, std::chrono::steady_clock::now()};
    }
    if (interrupt_requested() && !told) {
      for (const auto& entry : running)
        kill(entry.first, SIGTERM);
      told = true;
    }
    if (running.empty())
      continue;
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0 && errno == EINTR)
      continue;
    if (pid < 0)
      throw std::runtime_error("repeat: waitpid failed: " + std::string(std::strerror(errno)));
    const auto found = running.find(pid);
    if (found == running.end())
      continue;
    const Child child = found->second;
    running.erase(found);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - child.start).count();
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    const std::string stem = "seed-" + std::to_string(child.seed);
    Iteration it =
        repeat::iteration_from_report(child.seed, code, seconds, read_json(dir / (stem + ".json")));
    if (it.outcome == memory::PhaseStatus::kError)
      it.detail += "; its output: " + (dir / (stem + ".log")).string();
    std::printf(
        "[%zu/%zu] seed %llu: %s  %s  %.1f s\n",
        summary.iterations.size() + 1,
        seeds.size(),
        static_cast<unsigned long long>(child.seed),
        memory::to_string(it.outcome),
        peaks_line(it).c_str(),
        seconds);
    std::fflush(stdout);
    summary.iterations.push_back(std::move(it));
  }
  std::sort(summary.iterations.begin(), summary.iterations.end(), [](const auto& a, const auto& b) {
    return a.seed < b.seed;
  });
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
    const nlohmann::json doc = read_json(file);
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
  Summary merged;
  try {
    merged = repeat::merge(shards);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  const auto planned = static_cast<size_t>(merged.plan.runs);
  if (merged.iterations.size() != planned)
    std::printf("merge: %zu of %zu planned seeds present\n", merged.iterations.size(), planned);
  return finish(merged, args.report_file, args.junit_file);
}

}  // namespace oomguard::cli
