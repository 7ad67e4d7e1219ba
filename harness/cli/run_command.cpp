#include "harness/cli/run_command.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <thread>

#include <ATen/Parallel.h>

#include "data/text_source.h"
#include "harness/cli/exit_codes.h"
#include "harness/interrupt.h"
#include "harness/log.h"
#include "harness/memory/cards.h"
#include "harness/memory/sizes.h"
#include "harness/memory/tracking_allocator.h"
#include "harness/run/smoke_run.h"

namespace oomguard::cli {
namespace {

nlohmann::json read_config_file(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw run::ConfigError("config " + path + ": cannot be opened");
  auto doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded())
    throw run::ConfigError("config " + path + ": malformed JSON");
  return doc;
}

double headroom_percent(const run::PhaseReport& p) {
  return 100.0 * static_cast<double>(p.budget_bytes - p.memory.peak_allocated_bytes) /
         static_cast<double>(p.budget_bytes);
}

void print_table(const run::RunReport& report) {
  using memory::format_size;
  std::printf(
      "%-10s %-16s %12s %12s %9s %8s\n",
      "phase",
      "status",
      "peak",
      "budget",
      "headroom",
      "seconds");
  for (const auto& p : report.phases) {
    std::printf(
        "%-10s %-16s %12s %12s %8.1f%% %8.2f\n",
        p.memory.name.c_str(),
        p.status.c_str(),
        format_size(p.memory.peak_allocated_bytes).c_str(),
        format_size(p.budget_bytes).c_str(),
        headroom_percent(p),
        p.memory.wall_seconds);
  }
  std::printf("outcome: %s\n", report.outcome.c_str());
}

std::string disabled_guards(const run::Guards& guards) {
  std::string off;
  for (const auto& g : run::guard_table()) {
    if (!(guards.*g.flag))
      off += std::string(off.empty() ? "" : ",") + g.name;
  }
  return off.empty() ? "none" : off;
}

}  // namespace

void check_writable(const std::string& path, const char* option) {
  if (path.empty())
    return;
  const std::string probe = path + ".tmp";
  std::ofstream out(probe);
  if (!out)
    throw run::ConfigError(std::string(option) + " " + path + ": cannot be written");
  out.close();
  std::remove(probe.c_str());
}

void add_run_options(CLI::App& app, RunArgs& args) {
  app.add_option("--config", args.config_file, "JSON config; the embedded default otherwise")
      ->check(CLI::ExistingFile);
  app.add_option("--set", args.sets, "override one key, e.g. --set train.steps=10 (repeatable)");
  app.add_option(
      "--disable-guard",
      args.disabled_guards,
      "switch a guard off to reproduce its bug: no_grad_eval, truncate, max_new_tokens, kv_cap, "
      "grad_checkpoint, empty_cache or all (repeatable)");
  app.add_option("--seed", args.seed, "seed for data, init and sampling")
      ->check(CLI::Range(int64_t{0}, int64_t{4294967295}));
  app.add_option("--device", args.device, "auto, cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  auto* capacity = app.add_option(
      "--capacity", args.capacity, "emulated card capacity, e.g. 512MiB or 14.75GiB");
  std::vector<std::string> cards;
  for (const auto& c : memory::card_profiles())
    cards.push_back(c.name);
  app.add_option("--card", args.card, "emulated card profile")
      ->check(CLI::IsMember(cards))
      ->excludes(capacity);
  app.add_option("--report", args.report_file, "write the JSON report here");
  app.add_flag("--print-config", args.print_config, "print the resolved config and exit");
}

ResolvedRun resolve_run(const RunArgs& args) {
  nlohmann::json overrides = nlohmann::json::object();
  if (!args.config_file.empty())
    overrides = read_config_file(args.config_file);
  for (const auto& s : args.sets)
    run::apply_set(overrides, s);
  for (const auto& g : args.disabled_guards)
    run::disable_guard(overrides, g);
  ResolvedRun resolved{run::load_config(overrides), 0};
  // A bad data file is a usage error too: found here, before anything runs.
  if (!resolved.config.data_file.empty()) {
    const auto& g = resolved.config.generate;
    const auto samples = data::read_samples(resolved.config.data_file);
    const auto long_enough = static_cast<int64_t>(phases::prompt_sources(samples, g).size());
    if (long_enough < g.prompts)
      throw run::ConfigError(
          "data file " + resolved.config.data_file + ": " + std::to_string(long_enough) +
          " samples hold generate.prompt_length = " + std::to_string(g.prompt_length) +
          " bytes, generate.prompts needs " + std::to_string(g.prompts) +
          "; lower generate.prompts or generate.prompt_length");
  }
  if (args.device == "cuda")
    throw run::ConfigError("--device cuda: this build measures CPU runs only so far; use cpu");
  if (!args.card.empty())
    resolved.capacity_bytes = memory::find_card(args.card).capacity_bytes();
  if (!args.capacity.empty())
    resolved.capacity_bytes = memory::parse_size(args.capacity);
  return resolved;
}

int run_command(const RunArgs& args) {
  // Everything the user gave is checked before anything runs.
  const ResolvedRun resolved = resolve_run(args);
  const run::RunConfig& config = resolved.config;
  if (args.print_config) {
    std::cout << config.resolved.dump(2) << "\n";
    return kExitPass;
  }
  if (!args.card.empty()) {
    const auto& card = memory::find_card(args.card);
    log::info(
        "card " + card.name + ": total " + memory::format_size(card.total_bytes) + " (" +
        card.note + "), context reserve " + memory::format_size(card.context_bytes) +
        " -> capacity " + memory::format_size(resolved.capacity_bytes));
  }
  check_writable(args.report_file, "--report");

  const int threads = config.threads > 0 ? static_cast<int>(config.threads)
                                         : static_cast<int>(std::thread::hardware_concurrency());
  at::set_num_threads(std::max(threads, 1));
  auto& meter = memory::TrackingAllocator::instance();
  meter.set_capacity(resolved.capacity_bytes);
  log::info(
      "oomguard run: seed " + std::to_string(args.seed) + ", device cpu, " +
      std::to_string(at::get_num_threads()) + " threads, capacity " +
      (resolved.capacity_bytes > 0 ? memory::format_size(resolved.capacity_bytes)
                                   : std::string("none")) +
      ", guards off: " + disabled_guards(config.guards));

  run::RunOptions options;
  options.seed = static_cast<uint64_t>(args.seed);
  options.capacity_bytes = resolved.capacity_bytes;
  options.on_phase = [](const run::PhaseReport& p) {
    char pct[32];
    std::snprintf(pct, sizeof(pct), "%.1f%%", headroom_percent(p));
    log::info(
        "[mem] phase=" + p.memory.name +
        " peak=" + memory::format_size(p.memory.peak_allocated_bytes) + " budget=" +
        memory::format_size(p.budget_bytes) + " headroom=" + pct + " status=" + p.status);
  };
  install_interrupt_handlers();
  const run::RunReport report = run::smoke_run(config, meter, options);
  if (report.oom) {
    log::error("out of memory in phase " + report.oom->phase + ": " + report.oom->message);
  }
  if (report.outcome == "interrupted") {
    log::warn("interrupted by a signal in phase " + report.phases.back().memory.name);
  }
  if (!args.report_file.empty())
    run::write_report(report, args.report_file);
  print_table(report);
  if (report.outcome == "oom")
    return kExitOom;
  if (report.outcome == "interrupted")
    return kExitInterrupted;
  return report.outcome == "pass" ? kExitPass : kExitBudget;
}

}  // namespace oomguard::cli
