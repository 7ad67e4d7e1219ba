// harness/cli/main.cpp: the command line's parsers, in C++: what each option fills, and what
// repeat refuses to pass on to its runs. The commands themselves are tested in tests/cli/*.sh.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "harness/cli/compare_command.h"
#include "harness/cli/repeat_command.h"
#include "harness/cli/run_command.h"

namespace oomguard::cli {
namespace {

// Parses `args` (without the program's name) with `declare`'s options.
template <typename Args, typename Declare>
Args parsed(Declare declare, std::vector<std::string> args) {
  CLI::App app{"test"};
  Args out;
  declare(app, out);
  std::reverse(args.begin(), args.end());  // CLI11 takes a vector in reverse order
  app.parse(args);
  return out;
}

TEST(Options, RunFillsItsRequest) {
  const RunArgs a = parsed<RunArgs>(
      add_run_options,
      {"--set",
       "train.steps=2",
       "--set",
       "run.threads=1",
       "--seed",
       "7",
       "--device",
       "cuda:1",
       "--card",
       "t4",
       "--disable-guard",
       "truncate",
       "--fail-on-retry",
       "--allocator-model",
       "cuda",
       "--rules",
       "none"});
  EXPECT_EQ(a.sets, (std::vector<std::string>{"train.steps=2", "run.threads=1"}));
  EXPECT_EQ(a.seed, 7);
  EXPECT_EQ(a.device, "cuda:1");
  EXPECT_EQ(a.card, "t4");
  EXPECT_EQ(a.disabled_guards, (std::vector<std::string>{"truncate"}));
  EXPECT_TRUE(a.fail_on_retry);
  EXPECT_EQ(a.allocator_model, "cuda");
  EXPECT_EQ(a.rules, "none");
  EXPECT_TRUE(a.capacity.empty());
}

TEST(Options, RunRefusesWhatItCannotTake) {
  EXPECT_THROW(
      parsed<RunArgs>(add_run_options, {"--card", "t4", "--capacity", "1GiB"}), CLI::ParseError);
  EXPECT_THROW(parsed<RunArgs>(add_run_options, {"--card", "v100-64"}), CLI::ParseError);
  EXPECT_THROW(parsed<RunArgs>(add_run_options, {"--seed", "-1"}), CLI::ParseError);
  EXPECT_THROW(parsed<RunArgs>(add_run_options, {"--allocator-model", "rocm"}), CLI::ParseError);
  EXPECT_THROW(
      parsed<RunArgs>(add_run_options, {"--config", "/no/such/file.json"}), CLI::ParseError);
}

TEST(Options, RepeatPassesItsRunOptionsOn) {
  const RunArgs a = parse_run_args({"--disable-guard", "all", "--capacity", "300MiB"});
  EXPECT_EQ(a.disabled_guards, (std::vector<std::string>{"all"}));
  EXPECT_EQ(a.capacity, "300MiB");
  for (const auto& [args, words] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--seed", "3"}, "--seed belongs to repeat"},
           {{"--report", "r.json"}, "--report belongs to repeat"},
           {{"--print-config"}, "--print-config belongs to repeat"},
           {{"--trace", "t.jsonl"}, "--trace would have every run write the same file"},
           {{"--snapshot", "s.pickle"}, "--snapshot would have every run write the same file"},
           {{"--nope"}, "run options: "}}) {
    try {
      parse_run_args(args);
      ADD_FAILURE() << args.front() << " was passed on";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  }
}

TEST(Options, RepeatAndCompareFillTheirArgs) {
  const RepeatArgs r = parsed<RepeatArgs>(
      add_repeat_options, {"-n", "12", "--jobs", "2", "--shard", "0/4", "--runs-dir", "runs"});
  EXPECT_EQ(r.runs, 12);
  EXPECT_EQ(r.jobs, 2);
  EXPECT_EQ(r.shard, "0/4");
  EXPECT_EQ(r.runs_dir, "runs");
  EXPECT_THROW(parsed<RepeatArgs>(add_repeat_options, {"--jobs", "2"}), CLI::ParseError);  // no -n
  const CompareArgs c = parsed<CompareArgs>(
      add_compare_options,
      {"base.json",
       "head",
       "--fail-above",
       "5%",
       "--fail-above",
       "evaluate=2%",
       "--markdown",
       "m.md",
       "--markdown-rows",
       "3"});
  EXPECT_EQ(c.base, "base.json");
  EXPECT_EQ(c.head, "head");
  EXPECT_EQ(c.limits, (std::vector<std::string>{"5%", "evaluate=2%"}));
  EXPECT_EQ(c.markdown_rows, 3);
  EXPECT_THROW(
      parsed<CompareArgs>(add_compare_options, {"a", "b", "--markdown-rows", "0"}),
      CLI::ParseError);
}

}  // namespace
}  // namespace oomguard::cli
