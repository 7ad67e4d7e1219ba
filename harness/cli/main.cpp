// oomguard: the command line. Only the cli/ files turn errors into exit codes.
#include <cstdio>

#include <CLI/CLI.hpp>
#include <c10/util/Exception.h>

#include "harness/cli/exit_codes.h"
#include "harness/cli/plot_command.h"
#include "harness/cli/repeat_command.h"
#include "harness/cli/replay_command.h"
#include "harness/cli/run_command.h"

int main(int argc, char** argv) {
  using namespace oomguard::cli;
  CLI::App app{"oomguard: a training smoke test that fails before the card runs out of memory"};
  app.require_subcommand(1);

  RunArgs run_args;
  auto* run = app.add_subcommand(
      "run", "train -> evaluate -> generate, each phase's peak memory checked against its budget");
  add_run_options(*run, run_args);

  RepeatArgs repeat_args;
  auto* repeat = app.add_subcommand(
      "repeat",
      "N runs over seeds S..S+N-1, each in its own process: failure rate with its 95% interval, "
      "peak spread, worst seed. Options after these are passed to every run.");
  repeat->add_option("-n,--runs", repeat_args.runs, "number of runs")->required();
  repeat->add_option("--seed-start", repeat_args.seed_start, "first seed")
      ->check(CLI::Range(int64_t{0}, int64_t{4294967295}));
  repeat->add_option("--jobs", repeat_args.jobs, "runs at a time (cores are shared between them)");
  repeat->add_option(
      "--shard", repeat_args.shard, "I/K: only every K-th seed, from the I-th (0-based)");
  repeat->add_option("--report", repeat_args.report_file, "write the JSON summary here");
  repeat->add_option(
      "--junit", repeat_args.junit_file, "write JUnit XML here, a test case per run");
  repeat->add_option("--runs-dir", repeat_args.runs_dir, "keep each run's report and output here");
  repeat->allow_extras();

  MergeArgs merge_args;
  auto* merge = app.add_subcommand("merge", "combine repeat summaries of shards into one");
  merge->add_option("files", merge_args.files, "summaries written by repeat --report")
      ->required()
      ->check(CLI::ExistingFile);
  merge->add_option("--report", merge_args.report_file, "write the merged JSON summary here");
  merge->add_option("--junit", merge_args.junit_file, "write JUnit XML here");

  ReplayArgs replay_args;
  auto* replay = app.add_subcommand(
      "replay",
      "predict a GPU run without the GPU: an allocation trace (run --trace) or a PyTorch "
      "memory snapshot through a model of the CUDA caching allocator for cards and settings; "
      "exit 3 on a predicted OOM");
  add_replay_options(*replay, replay_args);

  PlotArgs plot_args;
  auto* plot = app.add_subcommand(
      "plot",
      "memory over a run as a picture (SVG or HTML): allocated and modelled reserved bytes, "
      "phases, budgets, the card, the peak and what was live at it");
  add_plot_options(*plot, plot_args);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0)
      return app.exit(e);  // --help
    // One line naming the bad input, like every other usage error.
    std::fprintf(stderr, "oomguard: %s; see --help\n", e.what());
    return kExitUsage;
  }
  try {
    if (*run) {
      run_args.argv = argv;
      return run_command(run_args);
    }
    if (*repeat) {
      repeat_args.run_args = repeat->remaining();
      return repeat_command(repeat_args, argv[0]);
    }
    if (*replay)
      return replay_command(replay_args);
    if (*plot)
      return plot_command(plot_args);
    return merge_command(merge_args);
  } catch (const c10::Error& e) {  // before std::exception: what() carries a backtrace
    std::fprintf(stderr, "oomguard: %s\n", e.what_without_backtrace());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "oomguard: %s\n", e.what());
  }
  return kExitUsage;
}
