// A whole `oomguard run` against `oomguard run --worst-case` with the same options (the default
// run predicted for a T4 by the allocator model, guarded and unguarded), each a process of its
// own as a user starts it: the worst case's cost as a ratio of a plain run's
// (ci/bench_table.py). And `oomguard run --device meta` on models of growing size, each
// process's time and largest resident set (max_rss_bytes): the cost of a prediction from
// shapes alone, against the CPU path's on GPT-2-small.
#include <cstdlib>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace oomguard::bench {
namespace {

// An executable beside this benchmark's (build/<preset>/bin/).
std::string beside(const std::string& name) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0)
    return name;
  std::string path(self, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/') + 1) + name;
}

std::string cli_path() {
  return beside("oomguard");
}

void BM_Run(benchmark::State& state) {
  const bool worst_case = state.range(0) == 1, guarded = state.range(1) == 1;
  const std::string command = cli_path() +
                              " run --card t4 --allocator-model cuda --set run.threads=2" +
                              (guarded ? "" : " --disable-guard all") +
                              (worst_case ? " --worst-case" : "") + " >/dev/null 2>&1";
  for (auto _ : state) {
    const int status = std::system(command.c_str());
    // 0: within budget; 1: over a budget (unguarded): the run went through either way.
    if (!WIFEXITED(status) || WEXITSTATUS(status) > 1) {
      state.SkipWithError(("exit status " + std::to_string(status) + ": " + command).c_str());
      return;
    }
  }
}
BENCHMARK(BM_Run)
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->ArgNames({"worst_case", "guarded"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(1);

// The models BM_MetaRun predicts, by its first argument.
struct Model {
  const char* card;
  bool checkpointed;  // gradient checkpointing on (the default guard), else disabled
  std::vector<std::string> sets;
};
const Model kModels[] = {
    // GPT-2-small: d_model 768, 12 layers, sequence 512, batch 8, no checkpointing.
    {"t4",
     false,
     {"model.d_model=768",
      "model.layers=12",
      "model.heads=12",
      "data.max_length=512",
      "train.steps=2",
      "evaluate.batches=1",
      "generate.max_new_tokens=8"}},
    // Near a T4's 16 GB: d_model 1024, 24 layers, sequence 1024, batch 4, no checkpointing.
    {"t4",
     false,
     {"model.d_model=1024",
      "model.layers=24",
      "model.heads=16",
      "data.max_length=1024",
      "data.batch_size=4",
      "train.steps=2",
      "evaluate.batches=1",
      "generate.max_new_tokens=8"}},
    // 1.31 billion parameters for an A100-80: d_model 2048, 26 layers, sequence 2048, batch 4,
    // checkpointed.
    {"a100-80",
     true,
     {"model.d_model=2048",
      "model.layers=26",
      "model.heads=16",
      "model.max_seq_len=2048",
      "data.max_length=2048",
      "data.batch_size=4",
      "train.steps=2",
      "evaluate.batches=1",
      "generate.max_new_tokens=8"}},
};

// Runs `args` as a child process with `environment` ("NAME=value") added to this one's; its
// exit code (-1 when it did not exit) and largest resident set.
int run_child(
    const std::vector<std::string>& args,
    int64_t& max_rss_bytes,
    const std::vector<std::string>& environment = {}) {
  const pid_t pid = fork();
  if (pid == 0) {
    for (const std::string& e : environment)
      putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> argv;
    for (const std::string& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    if (freopen("/dev/null", "w", stdout) == nullptr ||
        freopen("/dev/null", "w", stderr) == nullptr)
      _exit(127);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  rusage usage{};
  if (pid < 0 || wait4(pid, &status, 0, &usage) != pid)
    return -1;
  max_rss_bytes = static_cast<int64_t>(usage.ru_maxrss) * 1024;  // KiB on Linux
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// --device meta (range 1: 1) or the CPU path (0) on kModels[range 0].
void BM_MetaRun(benchmark::State& state) {
  const Model& model = kModels[state.range(0)];
  const bool meta = state.range(1) == 1;
  std::vector<std::string> args = {
      cli_path(), "run", "--card", model.card, "--set", "run.threads=2"};
  if (!model.checkpointed)
    args.insert(args.end(), {"--disable-guard", "grad_checkpoint"});
  args.insert(args.end(), {"--device", meta ? "meta" : "cpu"});
  if (!meta)
    args.insert(args.end(), {"--allocator-model", "cuda"});
  for (const std::string& s : model.sets)
    args.insert(args.end(), {"--set", s});
  int64_t max_rss = 0;
  for (auto _ : state) {
    // 0: within budget; 1: over the default (small model's) budgets: it went through either way.
    const int rc = run_child(args, max_rss);
    if (rc != 0 && rc != 1) {
      state.SkipWithError(("exit " + std::to_string(rc)).c_str());
      return;
    }
  }
  state.counters["max_rss_bytes"] = static_cast<double>(max_rss);
}
BENCHMARK(BM_MetaRun)
    ->Args({0, 1})
    ->Args({1, 1})
    ->Args({2, 1})
    ->Args({0, 0})
    ->ArgNames({"model", "meta"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(1);

// A torch::nn encoder of 1.34 billion parameters made on Meta under MakeOnMeta and trained
// one AdamW step there, predicted for an A100-80 and a T4 (tests/meta/big_encoder_test.cpp):
// the process's time, construction included, and its largest resident set.
void BM_NnEncoderOnMeta(benchmark::State& state) {
  const std::vector<std::string> args = {beside("oomguard_big_encoder_tests")};
  const std::vector<std::string> environment = {
      "OOMGUARD_DEVICE=meta", "OOMGUARD_CARD=a100-80", "OOMGUARD_PREDICT=t4", "OOMGUARD_SEED=1"};
  int64_t max_rss = 0;
  for (auto _ : state) {
    const int rc = run_child(args, max_rss, environment);
    if (rc != 0) {
      state.SkipWithError(("exit " + std::to_string(rc)).c_str());
      return;
    }
  }
  state.counters["max_rss_bytes"] = static_cast<double>(max_rss);
}
BENCHMARK(BM_NnEncoderOnMeta)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

}  // namespace
}  // namespace oomguard::bench
