#include "harness/app/repeat.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <thread>

#include "harness/app/inputs.h"
#include "harness/report/run_report.h"

extern char** environ;

namespace oomguard::app {
namespace {

namespace fs = std::filesystem;

class ProcessLauncher final : public RunLauncher {
 public:
  int64_t start(const RepeatRun& run) override {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(
        &actions, 1, run.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    std::vector<char*> argv;
    for (const auto& a : run.argv)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    // The environment, with this run's own settings in place of any of the same name.
    std::vector<std::string> env_text(run.env);
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry = *e;
      const std::string name = entry.substr(0, entry.find('='));
      if (std::none_of(run.env.begin(), run.env.end(), [&](const std::string& own) {
            return own.compare(0, name.size() + 1, name + "=") == 0;
          }))
        env_text.push_back(entry);
    }
    std::vector<char*> env;
    for (auto& e : env_text)
      env.push_back(e.data());
    env.push_back(nullptr);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv.data(), env.data());
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0)
      throw std::runtime_error("repeat: cannot start a run: " + std::string(std::strerror(rc)));
    return pid;
  }

  std::optional<std::pair<int64_t, int>> wait_any() override {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0 && errno == EINTR)
      return std::nullopt;
    if (pid < 0)
      throw std::runtime_error("repeat: waitpid failed: " + std::string(std::strerror(errno)));
    return std::make_pair(
        int64_t{pid}, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  }

  void stop(int64_t id) override { kill(static_cast<pid_t>(id), SIGTERM); }
};

struct Running {
  RepeatRun run;
  std::string gpu;  // "" on CPU
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

RepeatRun make_run(const repeat::Plan& plan, uint64_t seed, const std::string& dir) {
  RepeatRun run;
  run.seed = seed;
  const std::string stem = (fs::path(dir) / ("seed-" + std::to_string(seed))).string();
  run.report_path = stem + ".json";
  run.log_path = stem + ".log";
  run.argv = {plan.program, "run", "--seed", std::to_string(seed), "--report", run.report_path};
  run.argv.insert(run.argv.end(), plan.run_args.begin(), plan.run_args.end());
  return run;
}

}  // namespace

repeat::Plan plan_repeat(const RepeatRequest& args, const std::string& program) {
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
  return plan;
}

// On CUDA (asked for, or auto with a device) with more than one job, each running job takes
// a GPU of its own: two memory fractions on one GPU could together hold more than the card,
// and each would see the other's memory. Refused when there are fewer GPUs than jobs. The
// CPU and the Meta device take none.
std::vector<std::string> gpus_for_jobs(
    int64_t jobs, const std::string& device, int device_count, const char* cuda_visible_devices) {
  if (jobs <= 1 || device == "cpu" || device == "meta")
    return {};
  if (device.rfind("cuda:", 0) == 0)
    throw UsageError(
        "repeat --jobs " + std::to_string(jobs) + " with --device " + device +
        ": the jobs take a GPU each; give --device cuda");
  const int count = device_count;
  if (device == "auto" && count == 0)
    return {};
  const std::vector<std::string> gpus = memory::visible_gpus(count, cuda_visible_devices);
  if (static_cast<int64_t>(gpus.size()) < jobs)
    throw UsageError(
        "repeat --jobs " + std::to_string(jobs) + " on CUDA: " + std::to_string(gpus.size()) +
        " GPU(s) visible, and each job needs one of its own (a memory fraction per GPU: two on "
        "one GPU could together hold more than the card, and each would see the other's "
        "memory); use --jobs " +
        std::to_string(std::max<size_t>(gpus.size(), 1)) + " or fewer");
  return gpus;
}

std::unique_ptr<RunLauncher> process_launcher() {
  return std::make_unique<ProcessLauncher>();
}

repeat::Summary run_repeat(
    const repeat::Plan& plan, const RepeatPool& pool, RunLauncher& launcher) {
  const std::vector<uint64_t> seeds = plan.seeds();
  const auto interrupted = [&] { return pool.interrupted && pool.interrupted(); };
  repeat::Summary summary;
  summary.plan = plan;
  std::map<int64_t, Running> running;
  std::vector<std::string> free_gpus(pool.gpus.rbegin(), pool.gpus.rend());
  size_t next = 0;
  bool told = false;
  while ((next < seeds.size() && !interrupted()) || !running.empty()) {
    while (!interrupted() && next < seeds.size() &&
           static_cast<int64_t>(running.size()) < pool.jobs &&
           (pool.gpus.empty() || !free_gpus.empty())) {
      RepeatRun run = make_run(plan, seeds[next++], pool.dir);
      std::string gpu;
      if (!pool.gpus.empty()) {
        gpu = free_gpus.back();
        free_gpus.pop_back();
        run.env.push_back("CUDA_VISIBLE_DEVICES=" + gpu);
      }
      fs::remove(run.report_path);
      const int64_t id = launcher.start(run);
      running[id] = {std::move(run), gpu, std::chrono::steady_clock::now()};
    }
    if (interrupted() && !told) {
      for (const auto& entry : running)
        launcher.stop(entry.first);
      told = true;
    }
    if (running.empty())
      continue;
    const auto ended = launcher.wait_any();
    if (!ended)
      continue;
    const auto found = running.find(ended->first);
    if (found == running.end())
      continue;
    const Running child = found->second;
    running.erase(found);
    if (!child.gpu.empty())
      free_gpus.push_back(child.gpu);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - child.start).count();
    repeat::Iteration it = repeat::iteration_from_report(
        child.run.seed, ended->second, seconds, read_json_file(child.run.report_path));
    if (it.outcome == memory::PhaseStatus::kError)
      it.detail += "; its output: " + child.run.log_path;
    summary.iterations.push_back(std::move(it));
    if (pool.on_iteration)
      pool.on_iteration(summary.iterations.back(), summary.iterations.size(), seeds.size());
  }
  std::sort(summary.iterations.begin(), summary.iterations.end(), [](const auto& a, const auto& b) {
    return a.seed < b.seed;
  });
  return summary;
}

repeat::WorstCaseRun run_worst_case(
    const repeat::Plan& plan, const RepeatPool& pool, RunLauncher& launcher) {
  RepeatRun run;
  run.seed = plan.seed_start;
  const std::string stem = (fs::path(pool.dir) / "worst-case").string();
  run.report_path = stem + ".json";
  run.log_path = stem + ".log";
  run.argv = {
      plan.program,
      "run",
      "--worst-case",
      "--seed",
      std::to_string(plan.seed_start),
      "--report",
      run.report_path};
  run.argv.insert(run.argv.end(), plan.run_args.begin(), plan.run_args.end());
  if (!pool.gpus.empty())
    run.env.push_back("CUDA_VISIBLE_DEVICES=" + pool.gpus.front());
  fs::remove(run.report_path);
  const int64_t id = launcher.start(run);
  std::optional<std::pair<int64_t, int>> ended;
  while (!ended || ended->first != id) {
    ended = launcher.wait_any();
    if (!ended && pool.interrupted && pool.interrupted())
      launcher.stop(id);
  }
  repeat::WorstCaseRun w;
  w.exit_code = ended->second;
  const nlohmann::json doc = read_json_file(run.report_path);
  if (doc.is_null())
    return w;
  try {
    const report::RunRecord record = report::run_record_from_json(doc, run.report_path);
    w.outcome = record.outcome;
    for (const report::PhaseRecord& p : record.phases)
      w.bounds.emplace_back(p.name, p.peak_allocated_bytes);
    if (record.worst_case.is_object() && record.worst_case.contains("reproduce"))
      w.reproduce = record.worst_case["reproduce"].get<std::string>();
  } catch (const std::exception&) {
    w.outcome = memory::PhaseStatus::kError;  // a report it cannot read
  }
  return w;
}

}  // namespace oomguard::app
