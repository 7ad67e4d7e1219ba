// A whole `oomguard run` against `oomguard run --worst-case` with the same options (the default
// run predicted for a T4 by the allocator model, guarded and unguarded), each a process of its
// own as a user starts it: the worst case's cost as a ratio of a plain run's
// (ci/bench_table.py).
#include <cstdlib>
#include <string>

#include <benchmark/benchmark.h>
#include <sys/wait.h>
#include <unistd.h>

namespace oomguard::bench {
namespace {

// The oomguard executable beside this benchmark's (build/<preset>/bin/).
std::string cli_path() {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0)
    return "oomguard";
  std::string path(self, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/') + 1) + "oomguard";
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

}  // namespace
}  // namespace oomguard::bench
