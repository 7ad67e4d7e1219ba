#include "harness/app/run_worst_case.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "data/corpus.h"
#include "harness/log.h"
#include "harness/shell_quote.h"
#include <oomguard/memory/sizes.h>
#include <oomguard/memory/trace_recorder.h>
#include <oomguard/sim/step_orders.h>

namespace oomguard::app {
namespace {

// What the worst case depends on: the samples' lengths (a data file's, or the synthetic
// corpus the seed draws, whose samples the plan may lengthen to the longest the generator
// draws), the loaders' seed, the collator, the phases and the guards.
WorstCaseData worst_case_data(
    const RunRequest& args,
    const ResolvedRun& resolved,
    const std::vector<std::string>& file_samples) {
  const run::RunConfig& c = resolved.config;
  WorstCaseData d;
  d.synthetic = file_samples.empty();
  d.seed = static_cast<uint64_t>(args.seed);
  data::CorpusConfig corpus = c.corpus;
  corpus.seed = d.seed;
  for (const std::string& s : d.synthetic ? data::make_synthetic_corpus(corpus) : file_samples)
    d.lengths.push_back(static_cast<int64_t>(s.size()));
  d.longest_length = data::longest_synthetic_length(c.corpus);
  d.shortest_long_length = data::shortest_long_tail_length(c.corpus);
  d.batch_size = c.batch_size;
  d.pad_to_longest = !c.guards.truncate;
  d.cut = c.guards.truncate ? c.max_length : c.model.max_seq_len;
  d.train_steps = c.train.steps;
  // The reserved figures depend on the whole train phase: its every step runs.
  d.every_train_step = resolved.model.has_value() || resolved.device == memory::DeviceKind::kCuda;
  d.evaluate_batches = c.evaluate.batches;
  d.prompts = c.generate.prompts;
  d.prompt_length = c.generate.prompt_length;
  d.cap_new_tokens = c.guards.max_new_tokens;
  d.max_new_tokens = c.generate.max_new_tokens;
  d.max_seq_len = c.model.max_seq_len;
  return d;
}

// The worst case's reserved peak searched over orders of the run's steps (`steps`: the run
// recorded in memory; null without the allocator model): each phase's figure the search's
// highest, an order that runs out of memory the run's outcome.
nlohmann::json search_reserved(
    const RunRequest& args,
    const ResolvedRun& resolved,
    memory::TraceRecorder* steps,
    run::RunReport& report) {
  const ResolvedRun::WorstCase& w = *resolved.worst_case;
  if (steps == nullptr)
    return reserved_json(
        nullptr,
        "",
        "on CUDA the run's steps are not recorded: the inputs run on the device in the seed's "
        "order");
  sim::StepOrderOptions o;
  o.orders = args.orders;
  o.seed = static_cast<uint64_t>(args.seed);
  o.settings = resolved.model->settings;
  o.device = resolved.model->device;
  o.workspace_bytes = resolved.model->workspace.bytes_per_handle;
  // Train's first step makes AdamW's state: it stays first.
  o.phases.resize(2);
  o.phases[0].name = "train";
  o.phases[0].fixed = 1;
  o.phases[0].places = w.plan.train_steps_searched;
  o.phases[1].name = "evaluate";
  for (size_t k = 0; k < 2; ++k) {
    o.phases[k].repeat_steps = w.data.synthetic;
    for (const WorstCaseStep& s : w.plan.phases[k].steps)
      o.phases[k].sizes.push_back(s.positions);
  }
  const sim::StepOrderSearch search = search_step_orders(steps->take_trace(), o);
  if (!search.refused.empty()) {
    log::warn("worst case: no order searched: " + search.refused);
    return reserved_json(&search, "", "");
  }
  log::info(
      "worst case: " + std::to_string(search.orders_tried) + " orders of the steps replayed: " +
      "reserved " + memory::format_size(search.lowest.result.peak_reserved_bytes) + " .. " +
      memory::format_size(search.highest.result.peak_reserved_bytes) + " (the run's own order " +
      memory::format_size(search.recorded.result.peak_reserved_bytes) + ", highest " +
      (search.highest.how == "recorded" ? "the run's own" : search.highest.how) + ")");
  // The run took more train steps than a plain run (the longest sample's after the seed's):
  // each phase's reserved figure is the highest of the sequences of a plain run's steps.
  for (run::PhaseReport& p : report.phases)
    for (const auto& spread : search.phases)
      if (spread.name == p.memory.name)
        p.memory.peak_reserved_bytes = spread.highest_bytes;
  const auto& oom = search.highest.result.oom;
  if (oom && !report.oom) {
    for (run::PhaseReport& p : report.phases)
      if (p.memory.name == oom->phase)
        p.status = memory::PhaseStatus::kOom;
    report.outcome = memory::worst(report.outcome, memory::PhaseStatus::kOom);
    report.oom = run::OomReport{
        oom->phase,
        oom->info.requested_bytes,
        oom->info.message + " (predicted for an order of the run's steps: worst_case.reserved)"};
  }
  return reserved_json(
      &search,
      worst_case_reproduce(
          args, resolved, &search.highest.order.at(0), &search.highest.order.at(1)),
      "");
}

}  // namespace

void resolve_worst_case(
    const RunRequest& args, ResolvedRun& resolved, const std::vector<std::string>& file_samples) {
  run::RunConfig& c = resolved.config;
  if (!c.train_order.empty() || !c.evaluate_order.empty() || !c.corpus.sample_lengths.empty())
    throw UsageError(
        "--worst-case chooses data.train_order, data.evaluate_order and data.sample_lengths "
        "itself; drop them (or drop --worst-case to run the inputs given)");
  if (args.orders < 1)
    throw UsageError("--orders " + std::to_string(args.orders) + ": expected 1 or more");
  if (c.generate.stop_at_eos)
    throw UsageError(
        "--worst-case runs generation until the longest prompt source ends, and "
        "generate.stop_at_eos would end it where the tokens drawn say; set it false");
  ResolvedRun::WorstCase w;
  w.data = worst_case_data(args, resolved, file_samples);
  w.plan = plan_worst_case(w.data);
  const int64_t longest = *std::max_element(w.plan.lengths.begin(), w.plan.lengths.end());
  w.inputs = w.data.synthetic
                 ? "the synthetic corpus of seed " + std::to_string(args.seed) + " with " +
                       std::to_string(w.plan.sample_lengths.size()) +
                       " samples of lengths set (data.sample_lengths; the longest the generator "
                       "draws, " +
                       std::to_string(w.data.longest_length) + " bytes for data.max_length " +
                       std::to_string(c.max_length) + " and data.long_tail_factor " +
                       nlohmann::json(c.corpus.long_tail_factor).dump() + "), in the seed's order"
                 : "data file " + c.data_file + " (" + std::to_string(w.plan.lengths.size()) +
                       " samples, the longest " + std::to_string(longest) +
                       " bytes) in the orders named: seed " + std::to_string(args.seed) +
                       "'s with the longest samples swapped in";
  c.train_order = w.plan.train_order;
  c.evaluate_order = w.plan.evaluate_order;
  c.train.steps = w.plan.train_steps;
  c.corpus.sample_lengths = w.plan.sample_lengths;
  resolved.worst_case = std::move(w);
}

void complete_worst_case(
    const RunRequest& args,
    const ResolvedRun& resolved,
    memory::TraceRecorder* steps,
    bool cuda,
    run::RunReport& report) {
  const ResolvedRun::WorstCase& w = *resolved.worst_case;
  nlohmann::json reserved = nullptr;
  if (resolved.model || cuda)
    reserved = search_reserved(args, resolved, steps, report);
  report.worst_case =
      worst_case_json(w.plan, w.data, w.inputs, worst_case_reproduce(args, resolved), reserved);
}

std::string worst_case_reproduce(
    const RunRequest& a,
    const ResolvedRun& resolved,
    const std::vector<size_t>* train,
    const std::vector<size_t>* evaluate) {
  const bool named = a.argv != nullptr && a.argv[0] != nullptr;
  std::string cmd =
      shell_quote(named ? a.argv[0] : "oomguard") + " run --seed " + std::to_string(a.seed);
  const auto option = [&cmd](const char* name, const std::string& value) {
    cmd += std::string(" ") + name + " " + shell_quote(value);
  };
  if (!a.config_file.empty())
    option("--config", a.config_file);
  for (const std::string& s : a.sets)
    option("--set", s);
  for (const std::string& g : a.disabled_guards)
    option("--disable-guard", g);
  for (const auto& [name, value] :
       {std::pair{"--device", a.device}, {"--card", a.card}, {"--capacity", a.capacity}})
    if (!value.empty())
      option(name, value);
  if (a.allocator_model_given || a.allocator_model != "none")
    option("--allocator-model", a.allocator_model);
  if (a.rules != "all")
    option("--rules", a.rules);
  if (a.fail_on_retry)
    cmd += " --fail-on-retry";
  if (resolved.worst_case)
    for (const std::string& s : worst_case_sets(resolved.worst_case->plan, train, evaluate))
      option("--set", s);
  return cmd;
}

}  // namespace oomguard::app
