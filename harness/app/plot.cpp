#include "harness/app/plot.h"

#include <algorithm>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "harness/app/inputs.h"
#include "harness/app/replay.h"
#include "harness/compare/render.h"
#include "harness/plot/compare_plot.h"
#include "harness/plot/memory_plot.h"
#include "harness/plot/repeat_plot.h"
#include "harness/repeat/summary.h"
#include "harness/report/json_fields.h"
#include "harness/report/replay_report.h"
#include "harness/report/run_report.h"
#include <oomguard/memory/budgets.h>
#include <oomguard/memory/cards.h>
#include <oomguard/memory/sizes.h>
#include <oomguard/sim/replay.h>

namespace oomguard::app {
namespace {

// Budgets by phase and the card, from a run report (oomguard.report/1).
struct RunFacts {
  std::map<std::string, int64_t> budgets;
  int64_t capacity_bytes = 0;
  std::string card;
};

RunFacts read_run_report(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw UsageError("--run-report " + path + ": cannot be opened");
  const nlohmann::json doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (report::schema_of(doc) != report::kRunReportSchema)
    throw UsageError("--run-report " + path + ": not a run report (oomguard.report/1)");
  const report::RunRecord run = report::run_record_from_json(doc, "--run-report " + path);
  RunFacts facts;
  for (const report::PhaseRecord& p : run.phases)
    facts.budgets[p.name] = p.budget_bytes;
  facts.capacity_bytes = run.capacity_bytes;
  facts.card = run.device.card;
  return facts;
}

std::string base_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// A repeat summary's iterations as seed peaks per phase, read by the repeat library's reader.
plot::RepeatPlot repeat_plot(const nlohmann::json& doc, const std::string& path) {
  plot::RepeatPlot p;
  p.title = "oomguard: peaks per seed of " + base_name(path);
  repeat::Summary summary;
  try {
    summary = repeat::summary_from_json(doc);
  } catch (const std::exception& e) {
    throw UsageError(path + ": not a repeat summary (oomguard.repeat/1): " + e.what());
  }
  for (const repeat::Iteration& it : summary.iterations)
    for (const repeat::PhasePeak& ph : it.phases)
      if (std::find(p.phases.begin(), p.phases.end(), ph.phase) == p.phases.end()) {
        p.phases.push_back(ph.phase);
        p.budgets.push_back(ph.budget_bytes);
      }
  int64_t failures = 0;
  for (const repeat::Iteration& it : summary.iterations) {
    plot::RepeatPlot::Seed s{
        it.seed, memory::to_string(it.outcome), std::vector<int64_t>(p.phases.size(), -1)};
    for (const repeat::PhasePeak& ph : it.phases) {
      const auto at = std::find(p.phases.begin(), p.phases.end(), ph.phase);
      s.peaks[static_cast<size_t>(at - p.phases.begin())] = ph.peak_bytes;
    }
    failures += it.passed() ? 0 : 1;
    p.seeds.push_back(s);
  }
  p.subtitle = std::to_string(failures) + " of " + std::to_string(summary.iterations.size()) +
               " runs failed";
  if (p.seeds.empty() || p.phases.empty())
    throw UsageError(path + ": the repeat summary has no run with phases to draw");
  return p;
}

// A comparison (oomguard compare --report) as bars: its largest changes first, then the
// unchanged phases, at most kRows.
Picture compare_picture(const nlohmann::json& doc, const PlotRequest& args) {
  constexpr size_t kRows = 40;
  const compare::Comparison c = compare::from_json(doc, args.input);
  plot::ComparePlot p;
  p.title = "oomguard: memory, base vs head";
  p.subtitle = c.base.path + " (base) vs " + c.head.path + " (head)";
  std::vector<const compare::PhaseChange*> rows = c.largest_changes();
  for (const auto& phase : c.phases)
    if (!phase.changed())
      rows.push_back(&phase);
  for (size_t i = 0; i < rows.size() && i < kRows; ++i) {
    const auto& r = *rows[i];
    const auto& d = r.peak_allocated;
    std::string change = r.presence == compare::Presence::kBaseOnly   ? "only in base"
                         : r.presence == compare::Presence::kHeadOnly ? "only in head"
                         : d.bytes() == 0                             ? "no change"
                                          : compare::signed_size(d.bytes());
    if (r.over_limit)
      change += " (over " + r.limit + ")";
    const auto bar = [](int64_t v) { return v == compare::kNoFigure ? int64_t{-1} : v; };
    p.rows.push_back({c.label(r), bar(d.base), bar(d.head), r.over_limit, change});
  }
  if (p.rows.empty())
    throw UsageError(args.input + ": the comparison has no phases to draw");
  return {
      plot::render_compare_svg(p),
      p.title,
      std::to_string(p.rows.size()) + " of " + std::to_string(rows.size()) +
          " phases, base vs head"};
}

// The JSON document in `path` when it holds one (a report or summary), else null.
nlohmann::json json_document(const std::string& path) {
  std::ifstream in(path);
  char first = 0;
  in >> first;  // skips white space
  if (first != '{')
    return nullptr;
  in.seekg(0);
  return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
}

// A test's report (OOMGUARD_REPORT_DIR) holds no timeline: each phase is drawn as its start,
// peak and end, with the reserved peak where it was measured or predicted.
plot::MemoryPlot test_report_plot(const nlohmann::json& doc, const std::string& path) {
  const report::RunRecord run = report::run_record_from_json(doc, path);
  plot::MemoryPlot p;
  p.title = "oomguard: memory of " + run.test_name;
  p.capacity_bytes = run.capacity_bytes;
  p.capacity_label = (run.device.card.empty() ? "capacity " : run.device.card + ": ") +
                     memory::format_size(p.capacity_bytes);
  std::string predicted_for;
  for (const report::PhaseRecord& phase : run.phases) {
    plot::PhaseSpan span;
    span.name = phase.name;
    span.first = p.allocated.size();
    span.budget_bytes = phase.budget_bytes > 0 ? phase.budget_bytes : -1;
    span.peak_index = span.first + 1;
    span.peak_bytes = phase.peak_allocated_bytes;
    if (phase.live_at_peak)
      span.live_at_peak = *phase.live_at_peak;
    p.allocated.insert(
        p.allocated.end(),
        {phase.start_allocated_bytes, phase.peak_allocated_bytes, phase.end_allocated_bytes});
    if (phase.peak_reserved_bytes >= 0)
      p.reserved.insert(p.reserved.end(), 3, phase.peak_reserved_bytes);
    const nlohmann::json predictions = phase.extra.value("predictions", nlohmann::json());
    if (predictions.is_array() && !predictions.empty() && predictions[0].contains("label") &&
        predictions[0]["label"].is_string())
      predicted_for = predictions[0]["label"].get<std::string>();
    if (phase.status == memory::PhaseStatus::kOom && p.oom_label.empty()) {
      p.oom_index = span.peak_index;
      p.oom_label = "out of memory in " + span.name;
    }
    p.phases.push_back(span);
  }
  if (p.reserved.size() != p.allocated.size())
    p.reserved.clear();  // measured or predicted for some phases only: not drawn
  p.reserved_label = predicted_for.empty() ? "reserved (measured)"
                                           : "reserved (predicted for " + predicted_for + ")";
  p.subtitle = std::to_string(p.phases.size()) +
               " phases from a test's report: each one's start, peak and end (no trace)";
  return p;
}

// The card a picture draws: given, else the run report's, else none (the model then has no
// limit).
struct Card {
  std::string name;
  sim::DeviceLimits device;
  int64_t capacity = 0;

  std::string label() const {
    return (name.empty() ? "capacity " : name + ": ") + memory::format_size(capacity);
  }
};

Card card_of(const PlotRequest& args, const RunFacts& facts) {
  Card card;
  card.name = args.card.empty() && args.capacity.empty() ? facts.card : args.card;
  if (!card.name.empty()) {
    const memory::CardProfile& c = memory::find_card(card.name);
    card.device = sim::DeviceLimits::card(c.total_bytes, c.capacity_bytes());
    card.capacity = c.capacity_bytes();
  } else if (!args.capacity.empty() || facts.capacity_bytes > 0) {
    card.capacity = args.capacity.empty() ? facts.capacity_bytes : parse_capacity(args.capacity);
    card.device = sim::DeviceLimits::capacity(card.capacity);
  }
  return card;
}

// A trace or snapshot replayed through the caching-allocator model with the timeline kept,
// and drawn: allocated and reserved over the events, the phases with their budgets, the card,
// each phase's peak with what was live at it, and an OOM where the model ran out.
Picture trace_picture(const PlotRequest& args, const RunFacts& facts, const Card& card) {
  const Input input = read_input(args.input);
  const std::string conf = !args.alloc_conf.empty() ? args.alloc_conf
                           : input.snapshot         ? input.snapshot->alloc_conf
                                                    : "";
  sim::AllocatorSettings settings;
  try {
    settings = sim::AllocatorSettings::parse(conf);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--alloc-conf: ") + e.what());
  }
  sim::Timeline timeline;
  const sim::ReplayResult result = sim::replay(input.trace, settings, card.device, &timeline);

  plot::MemoryPlot p;
  p.title = "oomguard: memory of " + base_name(args.input);
  p.allocated = std::move(timeline.requested);
  p.reserved = std::move(timeline.reserved);
  p.reserved_label = "reserved (caching-allocator model, " +
                     (conf.empty() ? std::string("default settings") : conf) + ")";
  p.capacity_bytes = card.capacity;
  p.capacity_label = card.label();
  size_t phase_index = 0;
  for (size_t i = 0; i < input.trace.events.size() && i < p.allocated.size(); ++i) {
    if (input.trace.events[i].op != sim::TraceEvent::Op::kPhase)
      continue;
    const sim::PhasePrediction& r = result.phases[phase_index++];
    plot::PhaseSpan span;
    span.name = r.name;
    span.first = i;
    const auto budget = facts.budgets.find(r.name);
    span.budget_bytes = budget == facts.budgets.end() ? -1 : budget->second;
    span.peak_index = r.peak_event;
    span.peak_bytes = r.peak_requested_bytes;
    span.live_at_peak = r.live_at_peak;
    p.phases.push_back(span);
  }
  if (result.oom) {
    p.oom_index = static_cast<size_t>(result.events - 1);
    p.oom_label = "out of memory: " + memory::format_size(result.oom->bytes) + " in " +
                  result.oom->phase + (result.oom->tag.empty() ? "" : " (" + result.oom->tag + ")");
  }
  p.subtitle = std::to_string(p.allocated.size()) + " events, peak allocated " +
               memory::format_size(result.peak_requested_bytes) + ", peak reserved " +
               memory::format_size(result.peak_reserved_bytes) +
               (result.oom ? "; out of memory at event " + std::to_string(result.events) : "");
  return {
      plot::render_svg(p),
      p.title,
      std::to_string(p.allocated.size()) + " events, " + std::to_string(p.phases.size()) +
          " phases",
      true};
}

// A replay report holds no timeline: its trace is drawn again with its card and settings
// (those given win).
PlotRequest replayed_request(const nlohmann::json& doc, const PlotRequest& args) {
  // The trace first: a report whose trace is gone cannot be drawn, whatever else it holds.
  PlotRequest again = args;
  again.input = report::Fields(args.input).text(doc, "trace", "the report");
  if (!std::ifstream(again.input))
    throw UsageError(args.input + ": the trace it replayed, " + again.input + ", cannot be opened");
  const report::ReplayRecord record = report::replay_record_from_json(doc, args.input);
  const report::ReplayFigures& first = record.settings.front();
  if (args.card.empty() && args.capacity.empty()) {
    if (!first.card.empty())
      again.card = first.card;
    else
      again.capacity = std::to_string(first.capacity_bytes);
  }
  if (args.alloc_conf.empty())
    again.alloc_conf = first.alloc_conf;
  return again;
}

}  // namespace

bool html_output(const std::string& path) {
  return path.size() > 5 && path.substr(path.size() - 5) == ".html";
}

Picture make_picture(const PlotRequest& args) {
  const RunFacts facts = args.run_report.empty() ? RunFacts{} : read_run_report(args.run_report);
  const Card card = card_of(args, facts);
  const nlohmann::json doc = json_document(args.input);
  const std::string schema = report::schema_of(doc);
  if (schema == "oomguard.compare/1")
    return compare_picture(doc, args);
  if (schema == repeat::kSummarySchema) {
    const plot::RepeatPlot p = repeat_plot(doc, args.input);
    return {
        plot::render_repeat_svg(p),
        p.title,
        std::to_string(p.seeds.size()) + " seeds, " + std::to_string(p.phases.size()) + " phases"};
  }
  if (schema == report::kRunReportSchema && doc.contains("test")) {
    plot::MemoryPlot p = test_report_plot(doc, args.input);
    if (card.capacity > 0) {  // --card or --capacity draws another card's line
      p.capacity_bytes = card.capacity;
      p.capacity_label = card.label();
    }
    return {
        plot::render_svg(p),
        p.title,
        std::to_string(p.phases.size()) + " phases of a test's report"};
  }
  if (schema == report::kRunReportSchema)
    throw UsageError(
        args.input +
        " is a run report: plot the run's trace and give the report for its "
        "budgets, oomguard plot TRACE --run-report " +
        args.input);
  if (schema == report::kReplayReportSchema)
    return make_picture(replayed_request(doc, args));
  return trace_picture(args, facts, card);
}

}  // namespace oomguard::app
