// oomguard: the command line. Only this file turns errors into exit codes.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <thread>

#include <ATen/Parallel.h>
#include <CLI/CLI.hpp>
#include <c10/util/Exception.h>

#include "harness/log.h"
#include "harness/memory/cards.h"
#include "harness/memory/sizes.h"
#include "harness/memory/tracking_allocator.h"
#include "harness/run/smoke_run.h"

namespace {

constexpr int kExitPass = 0, kExitBudget = 1, kExitUsage = 2, kExitOom = 3;

struct Args {
  std::string config_file, report_file, capacity, card, device = "auto";
  std::vector<std::string> sets;
  int64_t seed = 0;
  bool print_config = false;
};

nlohmann::json read_config_file(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw oomguard::run::ConfigError("config " + path + ": cannot be opened");
  auto doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded())
    throw oomguard::run::ConfigError("config " + path + ": malformed JSON");
  return doc;
}

void check_writable(const std::string& path) {
  const std::string probe = path + ".tmp";
  std::ofstream out(probe);
  if (!out)
    throw oomguard::run::ConfigError("--report " + path + ": cannot be written");
  out.close();
  std::remove(probe.c_str());
}

double headroom_percent(const oomguard::run::PhaseReport& p) {
  return 100.0 * static_cast<double>(p.budget_bytes - p.memory.peak_allocated_bytes) /
         static_cast<double>(p.budget_bytes);
}

void print_table(const oomguard::run::RunReport& report) {
  using oomguard::memory::format_size;
  std::printf(
      "%-10s %-16s %12s %12s %9s %8s\n",
      "phase",
      "status",
      "peak",
      "budget",
      "headroom",
      "seconds");
  for (const auto& p : report.phases) {
    const double headroom = headroom_percent(p);
    std::printf(
        "%-10s %-16s %12s %12s %8.1f%% %8.2f\n",
        p.memory.name.c_str(),
        p.status.c_str(),
        format_size(p.memory.peak_allocated_bytes).c_str(),
        format_size(p.budget_bytes).c_str(),
        headroom,
        p.memory.wall_seconds);
  }
  std::printf("outcome: %s\n", report.outcome.c_str());
}

int run(const Args& args) {
  using namespace oomguard;
  // Everything the user gave is checked before anything runs.
  nlohmann::json overrides = nlohmann::json::object();
  if (!args.config_file.empty())
    overrides = read_config_file(args.config_file);
  for (const auto& s : args.sets)
    run::apply_set(overrides, s);
  run::RunConfig config = run::load_config(overrides);
  if (args.print_config) {
    std::cout << config.resolved.dump(2) << "\n";
    return kExitPass;
  }
  if (args.device == "cuda") {
    throw run::ConfigError("--device cuda: this build measures CPU runs only so far; use cpu");
  }
  int64_t capacity = 0;
  if (!args.card.empty()) {
    const auto& card = memory::find_card(args.card);
    capacity = card.capacity_bytes();
    log::info(
        "card " + card.name + ": total " + memory::format_size(card.total_bytes) + " (" +
        card.note + "), context reserve " + memory::format_size(card.context_bytes) +
        " -> capacity " + memory::format_size(capacity));
  }
  if (!args.capacity.empty())
    capacity = memory::parse_size(args.capacity);
  if (!args.report_file.empty())
    check_writable(args.report_file);

  const int threads = config.threads > 0 ? static_cast<int>(config.threads)
                                         : static_cast<int>(std::thread::hardware_concurrency());
  at::set_num_threads(std::max(threads, 1));
  auto& meter = memory::TrackingAllocator::instance();
  meter.set_capacity(capacity);
  log::info(
      "oomguard run: seed " + std::to_string(args.seed) + ", device cpu, " +
      std::to_string(at::get_num_threads()) + " threads, capacity " +
      (capacity > 0 ? memory::format_size(capacity) : std::string("none")));

  run::RunOptions options;
  options.seed = static_cast<uint64_t>(args.seed);
  options.capacity_bytes = capacity;
  options.on_phase = [](const run::PhaseReport& p) {
    const double headroom = headroom_percent(p);
    char pct[32];
    std::snprintf(pct, sizeof(pct), "%.1f%%", headroom);
    log::info(
        "[mem] phase=" + p.memory.name +
        " peak=" + memory::format_size(p.memory.peak_allocated_bytes) + " budget=" +
        memory::format_size(p.budget_bytes) + " headroom=" + pct + " status=" + p.status);
  };
  const run::RunReport report = run::smoke_run(config, meter, options);
  if (report.oom) {
    log::error("out of memory in phase " + report.oom->phase + ": " + report.oom->message);
  }
  if (!args.report_file.empty())
    run::write_report(report, args.report_file);
  print_table(report);
  if (report.outcome == "oom")
    return kExitOom;
  return report.outcome == "pass" ? kExitPass : kExitBudget;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"oomguard: a training smoke test that fails before the card runs out of memory"};
  app.require_subcommand(1);
  Args args;
  auto* cmd = app.add_subcommand(
      "run",
      "train -> evaluate -> generate, each phase's peak "
      "memory checked against its budget");
  cmd->add_option("--config", args.config_file, "JSON config; the embedded default otherwise")
      ->check(CLI::ExistingFile);
  cmd->add_option("--set", args.sets, "override one key, e.g. --set train.steps=10 (repeatable)");
  cmd->add_option("--seed", args.seed, "seed for data order, init and sampling")
      ->check(CLI::Range(int64_t{0}, int64_t{4294967295}));
  cmd->add_option("--device", args.device, "auto, cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  auto* capacity = cmd->add_option(
      "--capacity", args.capacity, "emulated card capacity, e.g. 512MiB or 14.75GiB");
  std::vector<std::string> cards;
  for (const auto& c : oomguard::memory::card_profiles())
    cards.push_back(c.name);
  cmd->add_option("--card", args.card, "emulated card profile")
      ->check(CLI::IsMember(cards))
      ->excludes(capacity);
  cmd->add_option("--report", args.report_file, "write the JSON report here");
  cmd->add_flag("--print-config", args.print_config, "print the resolved config and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : kExitUsage;
  }
  try {
    return run(args);
  } catch (const c10::Error& e) {  // before std::exception: what() carries a backtrace
    std::fprintf(stderr, "oomguard: %s\n", e.what_without_backtrace());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "oomguard: %s\n", e.what());
  }
  return kExitUsage;
}
