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

#include "harness/app/inputs.h"

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
  uint64_t seed = 0;
  std::string gpu;  // "" on CPU
  std::chrono::steady_clock::time_point start;
};

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
      running[launcher.start(run)] = {run.seed, gpu, std::chrono::steady_clock::now()};
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
    const RepeatRun run = make_run(plan, child.seed, pool.dir);
    repeat::Iteration it = repeat::iteration_from_report(
        child.seed, ended->second, seconds, read_json_file(run.report_path));
    if (it.outcome == memory::PhaseStatus::kError)
      it.detail += "; its output: " + run.log_path;
    summary.iterations.push_back(std::move(it));
    if (pool.on_iteration)
      pool.on_iteration(summary.iterations.back(), summary.iterations.size(), seeds.size());
  }
  std::sort(summary.iterations.begin(), summary.iterations.end(), [](const auto& a, const auto& b) {
    return a.seed < b.seed;
  });
  return summary;
}

std::vector<std::string> visible_gpus(int device_count, const char* cuda_visible_devices) {
  std::vector<std::string> listed;
  if (cuda_visible_devices != nullptr && *cuda_visible_devices != '\0') {
    std::string text = cuda_visible_devices;
    size_t at = 0;
    while (at <= text.size()) {
      const size_t comma = std::min(text.find(',', at), text.size());
      listed.push_back(text.substr(at, comma - at));
      at = comma + 1;
    }
  }
  std::vector<std::string> gpus;
  for (int i = 0; i < device_count; ++i)
    gpus.push_back(
        i < static_cast<int>(listed.size()) ? listed[static_cast<size_t>(i)] : std::to_string(i));
  return gpus;
}

}  // namespace oomguard::app
