#include "harness/repeat/summary.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <stdexcept>

#include "harness/repeat/flake_stats.h"
#include "harness/report/run_report.h"
#include "harness/shell_quote.h"
#include "harness/xml_text.h"

namespace oomguard::repeat {
namespace {

double pressure(const Iteration& it) {
  double worst = 0.0;
  for (const auto& p : it.phases) {
    if (p.budget_bytes > 0)
      worst =
          std::max(worst, static_cast<double>(p.peak_bytes) / static_cast<double>(p.budget_bytes));
  }
  return worst;
}

}  // namespace

Statistics statistics(const Summary& summary) {
  Statistics st;
  st.runs = static_cast<int64_t>(summary.iterations.size());
  std::vector<std::string> order;  // phases in run order
  std::map<std::string, std::vector<int64_t>> peaks;
  for (const auto& it : summary.iterations) {
    st.failures += it.passed() ? 0 : 1;
    for (const auto& p : it.phases) {
      if (peaks.find(p.phase) == peaks.end())
        order.push_back(p.phase);
      peaks[p.phase].push_back(p.peak_bytes);
    }
  }
  st.failure_rate =
      st.runs > 0 ? static_cast<double>(st.failures) / static_cast<double>(st.runs) : 0.0;
  st.wilson_95 = wilson_interval(st.failures, st.runs);
  if (st.failures == 0 && st.runs > 0)
    st.upper_bound_95 = zero_failure_upper_bound(st.runs);
  for (const auto& name : order)
    st.peaks.push_back({name, spread_of(peaks[name])});
  if (const Iteration* worst = worst_iteration(summary)) {
    st.worst_seed = worst->seed;
    st.reproduce = reproduce_command(summary.plan, worst->seed);
  }
  return st;
}

nlohmann::json to_json(const Statistics& st) {
  nlohmann::json phase_stats = nlohmann::json::array();
  for (const PhaseSpread& p : st.peaks)
    phase_stats.push_back(
        {{"phase", p.phase},
         {"runs", p.spread.count},
         {"min_bytes", p.spread.min},
         {"median_bytes", p.spread.median},
         {"max_bytes", p.spread.max}});
  return {
      {"runs", st.runs},
      {"failures", st.failures},
      {"failure_rate", st.failure_rate},
      {"wilson_95", {st.wilson_95.lo, st.wilson_95.hi}},
      {"upper_bound_95", st.upper_bound_95 ? nlohmann::json(*st.upper_bound_95) : nullptr},
      {"peaks", phase_stats},
      {"worst_seed", st.worst_seed ? nlohmann::json(*st.worst_seed) : nullptr},
      {"reproduce", st.worst_seed ? nlohmann::json(st.reproduce) : nullptr}};
}

namespace {

template <typename T>
T field(const nlohmann::json& j, const char* key, const char* what) {
  if (!j.is_object() || !j.contains(key))
    throw std::invalid_argument(std::string(what) + ": missing \"" + key + "\"");
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw std::invalid_argument(std::string(what) + ": \"" + key + "\" has the wrong type");
  }
}

memory::PhaseStatus status_field(const nlohmann::json& j, const char* key, const char* what) {
  try {
    return memory::phase_status_from_string(field<std::string>(j, key, what));
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string(what) + ": \"" + key + "\": " + e.what());
  }
}

}  // namespace

std::vector<uint64_t> Plan::seeds() const {
  std::vector<uint64_t> out;
  for (int64_t i = shard_index; i < runs; i += shard_count)
    out.push_back(seed_start + static_cast<uint64_t>(i));
  return out;
}

Iteration iteration_from_report(
    uint64_t seed, int exit_code, double wall_seconds, const nlohmann::json& report) {
  Iteration it;
  it.seed = seed;
  it.exit_code = exit_code;
  it.wall_seconds = wall_seconds;
  if (report.is_null()) {
    it.outcome = memory::PhaseStatus::kError;
    it.detail = "exit code " + std::to_string(exit_code) + " and no report";
    return it;
  }
  report::RunRecord run;
  try {
    run = report::run_record_from_json(report, "the report of seed " + std::to_string(seed));
  } catch (const std::invalid_argument& e) {
    it.outcome = memory::PhaseStatus::kError;
    it.detail =
        "exit code " + std::to_string(exit_code) + " and a report it cannot read: " + e.what();
    return it;
  }
  it.outcome = run.outcome;
  for (const report::PhaseRecord& p : run.phases)
    it.phases.push_back({p.name, p.status, p.peak_allocated_bytes, p.budget_bytes});
  if (run.oom)
    it.detail = "out of memory in " + run.oom->phase + ": " + run.oom->message;
  return it;
}

std::string reproduce_command(const Plan& plan, uint64_t seed) {
  std::string cmd = shell_quote(plan.program) + " run --seed " + std::to_string(seed);
  for (const auto& a : plan.run_args)
    cmd += " " + shell_quote(a);
  return cmd;
}

const Iteration* worst_iteration(const Summary& summary) {
  const Iteration* worst = nullptr;
  for (const auto& it : summary.iterations) {
    const int a = memory::severity(it.outcome);
    const int b = worst == nullptr ? -1 : memory::severity(worst->outcome);
    if (a > b || (a == b && pressure(it) > pressure(*worst)))
      worst = &it;
  }
  return worst;
}

std::vector<WorstCaseComparison> compare_with_worst_case(const Summary& summary) {
  std::vector<WorstCaseComparison> out;
  if (!summary.worst_case)
    return out;
  for (const auto& [phase, bound] : summary.worst_case->bounds) {
    WorstCaseComparison c{phase, bound, -1, 0};
    for (const auto& it : summary.iterations)
      for (const auto& p : it.phases)
        if (p.phase == phase && p.peak_bytes > c.highest_seed_bytes) {
          c.highest_seed_bytes = p.peak_bytes;
          c.highest_seed = it.seed;
        }
    out.push_back(c);
  }
  return out;
}

namespace {

nlohmann::json worst_case_json(const Summary& summary) {
  if (!summary.worst_case)
    return nullptr;
  nlohmann::json phases = nlohmann::json::array();
  for (const WorstCaseComparison& c : compare_with_worst_case(summary))
    phases.push_back(
        {{"name", c.phase},
         {"bound_bytes", c.bound_bytes},
         {"highest_seed_bytes",
          c.highest_seed_bytes < 0 ? nlohmann::json(nullptr)
                                   : nlohmann::json(c.highest_seed_bytes)},
         {"highest_seed",
          c.highest_seed_bytes < 0 ? nlohmann::json(nullptr) : nlohmann::json(c.highest_seed)}});
  const WorstCaseRun& w = *summary.worst_case;
  return {
      {"outcome", memory::to_string(w.outcome)},
      {"exit_code", w.exit_code},
      {"reproduce", w.reproduce},
      {"phases", phases}};
}

}  // namespace

nlohmann::json to_json(const Summary& summary) {
  const Plan& plan = summary.plan;
  nlohmann::json iterations = nlohmann::json::array();
  for (const auto& it : summary.iterations) {
    nlohmann::json phases = nlohmann::json::array();
    for (const auto& p : it.phases)
      phases.push_back(
          {{"name", p.phase},
           {"status", memory::to_string(p.status)},
           {"peak_allocated_bytes", p.peak_bytes},
           {"budget_bytes", p.budget_bytes}});
    iterations.push_back(
        {{"seed", it.seed},
         {"outcome", memory::to_string(it.outcome)},
         {"exit_code", it.exit_code},
         {"wall_seconds", it.wall_seconds},
         {"phases", phases},
         {"detail", it.detail}});
  }
  return {
      {"schema", kSummarySchema},
      {"plan",
       {{"seed_start", plan.seed_start},
        {"runs", plan.runs},
        {"shard_index", plan.shard_index},
        {"shard_count", plan.shard_count},
        {"program", plan.program},
        {"run_args", plan.run_args}}},
      {"iterations", iterations},
      {"statistics", to_json(statistics(summary))},
      {"worst_case", worst_case_json(summary)}};
}

Summary summary_from_json(const nlohmann::json& doc) {
  if (field<std::string>(doc, "schema", "summary") != kSummarySchema)
    throw std::invalid_argument("summary: schema is not oomguard.repeat/1");
  Summary s;
  const auto& plan = doc.at("plan");
  s.plan.seed_start = field<uint64_t>(plan, "seed_start", "plan");
  s.plan.runs = field<int64_t>(plan, "runs", "plan");
  s.plan.shard_index = field<int64_t>(plan, "shard_index", "plan");
  s.plan.shard_count = field<int64_t>(plan, "shard_count", "plan");
  s.plan.program = field<std::string>(plan, "program", "plan");
  s.plan.run_args = field<std::vector<std::string>>(plan, "run_args", "plan");
  for (const auto& j : field<nlohmann::json>(doc, "iterations", "summary")) {
    Iteration it;
    it.seed = field<uint64_t>(j, "seed", "iteration");
    it.outcome = status_field(j, "outcome", "iteration");
    it.exit_code = field<int>(j, "exit_code", "iteration");
    it.wall_seconds = field<double>(j, "wall_seconds", "iteration");
    it.detail = field<std::string>(j, "detail", "iteration");
    for (const auto& p : field<nlohmann::json>(j, "phases", "iteration"))
      it.phases.push_back(
          {field<std::string>(p, "name", "phase"),
           status_field(p, "status", "phase"),
           field<int64_t>(p, "peak_allocated_bytes", "phase"),
           field<int64_t>(p, "budget_bytes", "phase")});
    s.iterations.push_back(std::move(it));
  }
  if (doc.contains("worst_case") && !doc["worst_case"].is_null()) {
    const auto& j = doc["worst_case"];
    WorstCaseRun w;
    w.outcome = status_field(j, "outcome", "worst_case");
    w.exit_code = field<int>(j, "exit_code", "worst_case");
    w.reproduce = field<std::string>(j, "reproduce", "worst_case");
    for (const auto& p : field<nlohmann::json>(j, "phases", "worst_case"))
      w.bounds.emplace_back(
          field<std::string>(p, "name", "worst_case phase"),
          field<int64_t>(p, "bound_bytes", "worst_case phase"));
    s.worst_case = std::move(w);
  }
  return s;
}

Summary merge(const std::vector<Summary>& shards) {
  if (shards.empty())
    throw std::invalid_argument("merge: no summaries given");
  Summary merged;
  merged.plan = shards.front().plan;
  merged.plan.shard_index = 0;
  merged.plan.shard_count = 1;
  std::set<uint64_t> seen;
  for (const auto& s : shards) {
    if (s.plan.seed_start != merged.plan.seed_start || s.plan.runs != merged.plan.runs ||
        s.plan.run_args != merged.plan.run_args)
      throw std::invalid_argument(
          "merge: summaries of different repeats (seed range or run options differ); shard " +
          std::to_string(s.plan.shard_index) + "/" + std::to_string(s.plan.shard_count));
    for (const auto& it : s.iterations) {
      if (!seen.insert(it.seed).second)
        throw std::invalid_argument("merge: seed " + std::to_string(it.seed) + " appears twice");
      merged.iterations.push_back(it);
    }
    // Every shard ran the same worst case (the same run options): the first one's stands.
    if (!merged.worst_case && s.worst_case)
      merged.worst_case = s.worst_case;
  }
  std::sort(merged.iterations.begin(), merged.iterations.end(), [](const auto& a, const auto& b) {
    return a.seed < b.seed;
  });
  return merged;
}

std::string to_junit(const Summary& summary) {
  int64_t failures = 0;
  double seconds = 0.0;
  for (const auto& it : summary.iterations) {
    failures += it.passed() ? 0 : 1;
    seconds += it.wall_seconds;
  }
  char head[256];
  std::snprintf(
      head,
      sizeof(head),
      "<testsuite name=\"oomguard.repeat\" tests=\"%zu\" failures=\"%lld\" time=\"%.3f\">\n",
      summary.iterations.size(),
      static_cast<long long>(failures),
      seconds);
  std::string xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n";
  xml += head;
  for (const auto& it : summary.iterations) {
    char open[160];
    std::snprintf(
        open,
        sizeof(open),
        "  <testcase classname=\"oomguard.repeat\" name=\"seed_%llu\" time=\"%.3f\">\n",
        static_cast<unsigned long long>(it.seed),
        it.wall_seconds);
    xml += open;
    std::string peaks;
    for (const auto& p : it.phases)
      peaks += p.phase + ": " + memory::to_string(p.status) + ", peak " +
               std::to_string(p.peak_bytes) + " B, budget " + std::to_string(p.budget_bytes) +
               " B\n";
    if (!it.passed()) {
      const std::string outcome = memory::to_string(it.outcome);
      xml += "    <failure type=\"" + xml_escape(outcome) + "\" message=\"" +
             xml_escape(outcome + (it.detail.empty() ? "" : ": " + it.detail)) + "\">" +
             xml_escape("reproduce: " + reproduce_command(summary.plan, it.seed) + "\n" + peaks) +
             "</failure>\n";
    }
    xml += "    <system-out>" + xml_escape(peaks) + "</system-out>\n  </testcase>\n";
  }
  return xml + "</testsuite>\n</testsuites>\n";
}

}  // namespace oomguard::repeat
