// oomguard: the command line. Every option of every command is declared here, the one file
// that compiles CLI11 (a file declaring options with it took 15 s to compile at -O3 here).
// cli_main() (main() of harness/cli/entry.cpp) is the one place exceptions become exit codes
// (harness/cli/exit_codes.h).
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <c10/util/Exception.h>

#include "harness/cli/compare_command.h"
#include "harness/cli/exit_codes.h"
#include "harness/cli/main.h"
#include "harness/cli/plot_command.h"
#include "harness/cli/repeat_command.h"
#include "harness/cli/replay_command.h"
#include "harness/cli/run_command.h"
#include "harness/usage_error.h"
#include <oomguard/memory/cards.h>

namespace oomguard::cli {

// oomguard run's --worst-case and --orders, and the options that print and exit.
void add_worst_case_and_print_options(CLI::App& app, RunArgs& args) {
  app.add_flag(
      "--worst-case",
      args.worst_case,
      "run each phase on the worst inputs its data allows instead of the seed's: the longest "
      "samples in the batches where they cost most (any corpus the generator can draw, or a "
      "data file in any order), so one run bounds every seed's allocated peak; the report "
      "names the inputs and the command that reproduces them");
  app.add_option(
         "--orders",
         args.orders,
         "with --worst-case and --allocator-model cuda: orders of the run's steps replayed "
         "through the allocator model in search of the highest reserved peak (default 128)")
      ->check(CLI::Range(int64_t{1}, int64_t{100000}))
      ->each([&args](const std::string&) { args.orders_given = true; });
  app.add_flag("--print-config", args.print_config, "print the resolved config and exit");
  app.add_flag(
      "--print-budgets",
      args.print_budgets,
      "print the run's budgets per device and card as a budgets file (oomguard.budgets/1): "
      "cpu the config's, cuda:CARD those plus the card's cuBLAS workspaces; then exit");
}

void add_run_options(CLI::App& app, RunArgs& args) {
  app.add_option("--config", args.config_file, "JSON config; the embedded default otherwise")
      ->check(CLI::ExistingFile);
  app.add_option(
      "--set",
      args.sets,
      "override one key, e.g. --set train.steps=10, or --set train.precision=fp16-amp to train "
      "in mixed precision (fp32 by default, fp16-amp, bf16-amp: CUDA autocast, emulated on CPU "
      "and Meta) (repeatable)");
  app.add_option(
      "--disable-guard",
      args.disabled_guards,
      "switch a guard off to reproduce its bug: no_grad_eval, truncate, max_new_tokens, kv_cap, "
      "grad_checkpoint, empty_cache or all (repeatable)");
  app.add_option("--seed", args.seed, "seed for data, init and sampling")
      ->check(CLI::Range(int64_t{0}, int64_t{4294967295}));
  app.add_option(
      "--device",
      args.device,
      "auto (CUDA when a device is visible), cpu, cuda, cuda:N (the N-th visible CUDA "
      "device) or meta (shapes alone: any model size predicted with the allocator model, "
      "which is on by default there; a value read is the stand-in 0, and an operator that "
      "needs values or has no Meta kernel ends the run with exit 7); default: "
      "OOMGUARD_DEVICE, else auto");
  auto* capacity = app.add_option(
      "--capacity", args.capacity, "emulated card capacity, e.g. 512MiB or 14.75GiB");
  std::vector<std::string> cards;
  for (const auto& c : memory::card_profiles())
    cards.push_back(c.name);
  app.add_option(
         "--card", args.card, "emulated card profile (on a bigger GPU: its memory fraction)")
      ->check(CLI::IsMember(cards))
      ->excludes(capacity);
  app.add_option("--report", args.report_file, "write the JSON report here");
  app.add_flag(
      "--fail-on-retry",
      args.fail_on_retry,
      "fail a phase in which the CUDA allocator had to free its cache and retry (a near-OOM)");
  app.add_option(
      "--trace",
      args.trace_file,
      "record every allocation and free of a CPU or Meta run here (JSON Lines), for oomguard "
      "replay");
  app.add_option(
         "--allocator-model",
         args.allocator_model,
         "cuda: on CPU or Meta, pass every allocation through a model of the CUDA caching "
         "allocator (memory.alloc_conf applies): reserved memory is predicted and the emulated "
         "card fails where that allocator would, fragmentation included (default: none; cuda "
         "on the Meta device, from --device meta or OOMGUARD_DEVICE=meta)")
      ->check(CLI::IsMember({"none", "cuda"}))
      ->each([&args](const std::string&) { args.allocator_model_given = true; });
  app.add_option(
      "--rules",
      args.rules,
      "with --allocator-model cuda: the CPU-to-GPU rules the model applies: all (default), "
      "none, or names separated by commas (cublas_workspace, sdpa_attention, cpu_scratch)");
  app.add_option(
      "--snapshot",
      args.snapshot_file,
      "write the run as a PyTorch memory snapshot pickle, for PyTorch's memory viewer and "
      "oomguard replay: on CUDA the allocator's own recorded history; on CPU or Meta its "
      "allocations through the caching-allocator model (memory.alloc_conf, the card)");
  add_worst_case_and_print_options(app, args);
}

void add_replay_options(CLI::App& app, ReplayArgs& args) {
  app.add_option(
         "trace",
         args.trace_file,
         "a trace written by oomguard run --trace, or a PyTorch memory snapshot "
         "(torch.cuda.memory._dump_snapshot, torch::cuda::_memory_snapshot_pickled)")
      ->required()
      ->check(CLI::ExistingFile);
  std::vector<std::string> cards;
  for (const auto& c : memory::card_profiles())
    cards.push_back(c.name);
  app.add_option(
         "--card",
         args.cards,
         "the card to predict: its total, less the CUDA context, is what the allocator can get "
         "(repeatable: one replay per card)")
      ->check(CLI::IsMember(cards));
  app.add_option(
      "--capacity",
      args.capacities,
      "the most the process may reserve, e.g. 14GiB, as with a memory fraction (repeatable)");
  app.add_option(
      "--alloc-conf",
      args.alloc_confs,
      "caching-allocator settings (PYTORCH_CUDA_ALLOC_CONF), e.g. expandable_segments:True; "
      "repeatable: every setting on every card, side by side (default: none; for a snapshot, "
      "the settings it was recorded with)");
  app.add_option(
      "--torch-version",
      args.torch_version,
      "the LibTorch whose allocator to model, e.g. 1.13 (default: the one oomguard was built "
      "with; versions after 2.6 behave as 2.6)");
  app.add_option(
      "--rules",
      args.rules,
      "the CPU-to-GPU rules a trace of oomguard's is replayed with: all (default), none, or "
      "names (cublas_workspace: its gemm events take the card's cuBLAS workspaces)");
  app.add_option("--report", args.report_file, "write the JSON report here");
  app.add_option(
      "--export-snapshot",
      args.export_snapshot,
      "write the (first) replay as a PyTorch memory snapshot pickle, for PyTorch's memory viewer "
      "and python -m torch.cuda._memory_viz");
}

void add_plot_options(CLI::App& app, PlotArgs& args) {
  app.add_option(
         "input",
         args.input,
         "a trace (oomguard run --trace) or a PyTorch memory snapshot, replayed through the "
         "caching-allocator model for the reserved line; a replay report (its trace, card and "
         "settings); a repeat summary (repeat --report): each seed's peak per phase against "
         "its budget; or a comparison (compare --report): base and head per phase")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("-o,--output", args.output, "the picture: FILE.svg, or FILE.html (the same SVG)")
      ->required();
  app.add_option(
         "--run-report",
         args.run_report,
         "the run's report (oomguard run --report): its phase budgets and card are drawn")
      ->check(CLI::ExistingFile);
  std::vector<std::string> cards;
  for (const auto& c : memory::card_profiles())
    cards.push_back(c.name);
  auto* card = app.add_option("--card", args.card, "the card whose capacity is drawn and modelled")
                   ->check(CLI::IsMember(cards));
  app.add_option("--capacity", args.capacity, "a capacity to draw and model instead, e.g. 120MiB")
      ->excludes(card);
  app.add_option(
      "--alloc-conf",
      args.alloc_conf,
      "caching-allocator settings for the reserved line (default: none; a snapshot's own)");
}

void add_compare_options(CLI::App& app, CompareArgs& args) {
  const char* side =
      "a run report (run --report), a folder of GoogleTest layer reports "
      "(OOMGUARD_REPORT_DIR), a repeat summary, a replay report, a trace (run --trace) or a "
      "PyTorch memory snapshot";
  app.add_option("base", args.base, std::string("the base side: ") + side)->required();
  app.add_option("head", args.head, "the head side, of the same kind")->required();
  app.add_option(
      "--fail-above",
      args.limits,
      "exit 1 when a phase's peak allocated bytes grew by more than this: 5%, 64MiB, or "
      "PHASE=LIMIT for one phase (repeatable; a phase's own limit wins)");
  app.add_option(
      "--markdown",
      args.markdown_file,
      "write a Markdown table here, the largest changes first, for a GitHub step summary or "
      "pull-request comment (its first line is the marker <!-- oomguard-memory-diff -->)");
  app.add_option("--markdown-rows", args.markdown_rows, "changes shown before the rest are folded")
      ->check(CLI::PositiveNumber);
  app.add_option("--report", args.report_file, "write the comparison as JSON (oomguard.compare/1)");
}

void add_repeat_options(CLI::App& app, RepeatArgs& args) {
  app.add_option("-n,--runs", args.runs, "number of runs")->required();
  app.add_option("--seed-start", args.seed_start, "first seed")
      ->check(CLI::Range(int64_t{0}, int64_t{4294967295}));
  app.add_option(
      "--jobs",
      args.jobs,
      "runs at a time (cores are shared between them; on CUDA each takes a GPU of its own)");
  app.add_option("--shard", args.shard, "I/K: only every K-th seed, from the I-th (0-based)");
  app.add_flag(
      "--worst-case",
      args.worst_case,
      "after the seeds, one oomguard run --worst-case with the same options: the summary "
      "sets the highest seed's peak of each phase against that bound");
  app.add_option("--report", args.report_file, "write the JSON summary here");
  app.add_option("--junit", args.junit_file, "write JUnit XML here, a test case per run");
  app.add_option("--runs-dir", args.runs_dir, "keep each run's report and output here");
  app.allow_extras();
}

void add_merge_options(CLI::App& app, MergeArgs& args) {
  app.add_option("files", args.files, "summaries written by repeat --report")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--report", args.report_file, "write the merged JSON summary here");
  app.add_option("--junit", args.junit_file, "write JUnit XML here");
}

RunArgs parse_run_args(const std::vector<std::string>& run_args) {
  CLI::App parser{"run options"};
  RunArgs args;
  add_run_options(parser, args);
  std::vector<std::string> reversed(run_args.rbegin(), run_args.rend());
  try {
    parser.parse(reversed);
  } catch (const CLI::ParseError& e) {
    throw UsageError(std::string("run options: ") + e.what());
  }
  if (parser.count("--orders") > 0)
    throw UsageError(
        "repeat: --orders belongs to oomguard run --worst-case; repeat --worst-case runs one "
        "with the default orders");
  for (const char* owned : {"--seed", "--report", "--print-config", "--print-budgets"}) {
    if (parser.count(owned) > 0)
      throw UsageError(
          std::string("repeat: ") + owned + " belongs to repeat, not to the runs it starts");
  }
  if (!args.trace_file.empty() || !args.snapshot_file.empty())
    throw UsageError(
        std::string("repeat: ") + (args.trace_file.empty() ? "--snapshot" : "--trace") +
        " would have every run write the same file; record one run with oomguard run");
  return args;
}

int cli_main(int argc, char** argv) {
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
  add_repeat_options(*repeat, repeat_args);

  MergeArgs merge_args;
  auto* merge = app.add_subcommand("merge", "combine repeat summaries of shards into one");
  add_merge_options(*merge, merge_args);

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

  CompareArgs compare_args;
  auto* compare = app.add_subcommand(
      "compare",
      "what a change did to memory: base vs head by test, phase and tag, exact bytes; exit 1 "
      "when a phase grew above --fail-above");
  add_compare_options(*compare, compare_args);

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
    if (*compare)
      return compare_command(compare_args);
    return merge_command(merge_args);
  } catch (const oomguard::UsageError& e) {  // thrown only by parsing and resolving
    std::fprintf(stderr, "oomguard: %s\n", e.what());
    return kExitUsage;
  } catch (const c10::Error& e) {  // before std::exception: what() carries a backtrace
    std::fprintf(stderr, "oomguard: internal error: %s\n", e.what_without_backtrace());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "oomguard: internal error: %s\n", e.what());
  }
  return kExitInternal;
}

}  // namespace oomguard::cli
