#include "harness/compare/sides.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include <nlohmann/json.hpp>

#include "harness/compare/event_side.h"
#include "harness/repeat/summary.h"
#include "harness/report/json_fields.h"
#include "harness/report/replay_report.h"
#include "harness/report/run_report.h"
#include <oomguard/memory/sizes.h>

namespace oomguard::compare {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kReport = report::kRunReportSchema;
constexpr const char* kRepeat = repeat::kSummarySchema;
constexpr const char* kReplay = report::kReplayReportSchema;

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw InputError(path + ": " + what);
}

std::string read_bytes(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    bad(path, "not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    bad(path, "cannot be opened");
  std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad())
    bad(path, "cannot be read");
  return bytes;
}

// A JSON value as a short string: strings bare, null as "none", the rest as JSON.
std::string text_of(const json& v) {
  if (v.is_string())
    return v.get<std::string>();
  if (v.is_null())
    return "none";
  return v.dump();
}

// `doc` flattened to dotted keys under `prefix` ("train.steps" -> "8").
void flatten(const json& doc, const std::string& prefix, Facts& out) {
  if (doc.is_object() && !doc.empty()) {
    for (const auto& [key, value] : doc.items())
      flatten(value, prefix.empty() ? key : prefix + "." + key, out);
    return;
  }
  out.emplace_back(prefix, text_of(doc));
}

using report::Fields;

// A report (oomguard.report/1: the smoke run's and a test's alike), read by the report
// module's one reader: what its figures depend on, what they may differ in, and its phases.
TestFigures report_test(const json& doc, std::string name, const std::string& path) {
  const report::RunRecord run = report::run_record_from_json(doc, path);
  const auto none_if_empty = [](const std::string& v) { return v.empty() ? "none" : v; };
  TestFigures t;
  t.name = std::move(name);
  t.conditions = {
      {"seed", run.seed ? std::to_string(*run.seed) : std::string("none")},
      {"device", memory::to_string(run.device.type)},
      {"card", none_if_empty(run.device.card)},
      {"capacity", memory::format_size(run.capacity_bytes)},
      {"allocator settings", none_if_empty(run.device.alloc_conf)},
      {"allocator model", none_if_empty(run.device.allocator_model)},
      {"model rules", none_if_empty(run.device.model_rules)},
      {"worst case", run.worst_case.is_null() ? "no" : "yes (--worst-case)"}};
  t.context.emplace_back("LibTorch", run.torch_version);
  // The config holds the guards too; a test's report has neither.
  flatten(run.config, "", t.context);
  Facts guards;
  flatten(run.guards, "guards", guards);
  for (auto& g : guards)
    if (std::none_of(
            t.context.begin(), t.context.end(), [&](const auto& c) { return c.first == g.first; }))
      t.context.push_back(std::move(g));
  for (const report::PhaseRecord& p : run.phases) {
    PhaseFigures ph;
    ph.name = p.name;
    ph.peak_allocated_bytes = p.peak_allocated_bytes;
    ph.peak_reserved_bytes = p.peak_reserved_bytes < 0 ? kNoFigure : p.peak_reserved_bytes;
    ph.growth_bytes = p.end_allocated_bytes - p.start_allocated_bytes;
    ph.budget_bytes = p.budget_bytes;
    ph.status = memory::to_string(p.status);
    ph.tags_known = p.live_at_peak.has_value();
    if (p.live_at_peak)
      ph.live_at_peak = *p.live_at_peak;
    t.phases.push_back(std::move(ph));
  }
  return t;
}

using report::schema_of;

// The report's schema, checked against the one expected of this kind of side.
void expect_schema(const json& doc, const std::string& path, const std::string& family) {
  const std::string s = schema_of(doc);
  if (s.empty())
    bad(path, "not an oomguard report, summary or replay report (no \"schema\")");
  if (s == family)
    return;
  if (s.rfind(family.substr(0, family.find('/') + 1), 0) == 0)
    bad(path,
        "schema " + s + " is a version this oomguard does not read (it reads " + family + ")");
  bad(path,
      "schema " + s + " is not one oomguard compares (" + kReport + ", " + kRepeat + ", " +
          kReplay + ")");
}

json parse_json(const std::string& bytes, const std::string& path) {
  try {
    return json::parse(bytes);
  } catch (const json::parse_error& e) {
    bad(path, std::string("not valid JSON (truncated?): ") + e.what());
  }
}

// A folder of GoogleTest layer reports: `<Suite.Name>.json` whose test is that name. Other
// oomguard files there (the budgets file, a comparison) are skipped; foreign JSON is not.
Side read_folder(const std::string& path) {
  Side side{path, InputKind::kTestReports, {}};
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(path, ec))
    if (entry.path().extension() == ".json" && entry.is_regular_file())
      files.push_back(entry.path());
  if (ec)
    bad(path, "cannot be listed: " + ec.message());
  std::sort(files.begin(), files.end());
  for (const auto& file : files) {
    const json doc = parse_json(read_bytes(file.string()), file.string());
    const std::string schema = schema_of(doc);
    if (schema.rfind("oomguard.", 0) == 0 && schema.rfind("oomguard.report/", 0) != 0)
      continue;  // the budgets file, a summary, a comparison: not a test's report
    expect_schema(doc, file.string(), kReport);
    if (!doc.contains("test"))
      continue;  // a run report beside the tests' ones
    const Fields f(file.string());
    const auto name = f.text(f.at(doc, "test", "the report"), "name", "the report.test");
    std::string written = name;  // the layer writes a parameterised test's '/' as '_'
    std::replace(written.begin(), written.end(), '/', '_');
    if (written + ".json" != file.filename().string())
      continue;  // a per-seed copy: the folder's <Suite.Name>.json is the test's latest run
    side.tests.push_back(report_test(doc, name, file.string()));
  }
  if (side.tests.empty())
    bad(path, "no test reports in this folder (<Suite.Name>.json files of OOMGUARD_REPORT_DIR)");
  return side;
}

// The options of a repeat's runs that change what its figures mean (the card, the device,
// the allocator model and its settings): conditions; the rest (guards, --set) context.
void split_run_options(const std::vector<std::string>& args, TestFigures& t) {
  static const char* const kConditions[] = {
      "--card", "--capacity", "--device", "--allocator-model", "--rules", "--config"};
  std::map<std::string, std::string> found;
  std::string rest;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const size_t eq = a.find('=');
    const std::string option = a.substr(0, eq);
    const bool named = std::any_of(
        std::begin(kConditions), std::end(kConditions), [&](auto c) { return option == c; });
    if (named && eq != std::string::npos) {
      found[option] = a.substr(eq + 1);
    } else if (named && i + 1 < args.size()) {
      found[option] = args[++i];
    } else {
      rest += (rest.empty() ? "" : " ") + a;
    }
  }
  for (const char* c : kConditions)
    t.conditions.emplace_back(c, found.count(c) ? found[c] : "none");
  t.context.emplace_back("run options", rest.empty() ? "none" : rest);
}

// A repeat summary: per phase the highest peak of any seed.
Side read_summary(const json& doc, const std::string& path) {
  repeat::Summary s;
  try {
    s = repeat::summary_from_json(doc);
  } catch (const std::exception& e) {  // invalid_argument naming the field; json's own errors
    bad(path, std::string("not a repeat summary: ") + e.what());
  }
  TestFigures t;
  t.name = "repeat";
  t.conditions = {
      {"seeds", std::to_string(s.plan.seed_start) + " + " + std::to_string(s.plan.runs)},
      {"shard", std::to_string(s.plan.shard_index) + "/" + std::to_string(s.plan.shard_count)},
      {"runs finished", std::to_string(s.iterations.size())}};
  split_run_options(s.plan.run_args, t);
  for (const auto& it : s.iterations)
    for (const auto& p : it.phases) {
      auto ph = std::find_if(t.phases.begin(), t.phases.end(), [&](const PhaseFigures& x) {
        return x.name == p.phase;
      });
      if (ph == t.phases.end()) {
        ph = t.phases.insert(t.phases.end(), PhaseFigures{});
        ph->name = p.phase;
        ph->budget_bytes = p.budget_bytes;
      }
      ph->peak_allocated_bytes = std::max(ph->peak_allocated_bytes, p.peak_bytes);
    }
  return Side{path, InputKind::kRepeatSummary, {std::move(t)}};
}

// A replay report: one test per setting (card or capacity, allocator settings), the first
// with its phases, the others the whole trace as one phase (the report keeps per-phase
// figures of the first setting only). Both sides must hold the same settings.
Side read_replay(const json& doc, const std::string& path) {
  const report::ReplayRecord record = report::replay_record_from_json(doc, path);
  Side side{path, InputKind::kReplayReport, {}};
  const size_t n = record.settings.size();
  for (size_t i = 0; i < n; ++i) {
    const report::ReplayFigures& s = record.settings[i];
    TestFigures t;
    t.name = (s.card.empty() ? memory::format_size(s.capacity_bytes) : s.card) + " " +
             (s.alloc_conf.empty() ? "default" : s.alloc_conf);
    t.conditions = {
        {"setting", std::to_string(i + 1) + " of " + std::to_string(n)},
        {"modelled LibTorch", s.torch_version},
        {"capacity", memory::format_size(s.capacity_bytes)},
        {"cuBLAS workspaces", s.cublas_workspace.empty() ? "none" : s.cublas_workspace}};
    if (i == 0) {
      for (const report::ReplayPhase& p : record.phases) {
        PhaseFigures ph;
        ph.name = p.name;
        ph.peak_allocated_bytes = p.peak_allocated_bytes;
        ph.peak_reserved_bytes = p.peak_reserved_bytes;
        t.phases.push_back(std::move(ph));
      }
    } else {
      PhaseFigures whole;
      whole.name = "(whole trace)";
      whole.peak_allocated_bytes = s.peak_allocated_bytes;
      whole.peak_reserved_bytes = s.peak_reserved_bytes;
      whole.status = s.fits() ? "pass" : "oom";
      t.phases.push_back(std::move(whole));
    }
    side.tests.push_back(std::move(t));
  }
  return side;
}

}  // namespace

namespace {

struct KindNames {
  InputKind kind;
  const char *words, *plural, *key;
};

constexpr KindNames kKindNames[] = {
    {InputKind::kRunReport, "run report", "run reports", "run_report"},
    {InputKind::kTestReports, "folder of test reports", "folders of test reports", "test_reports"},
    {InputKind::kRepeatSummary, "repeat summary", "repeat summaries", "repeat_summary"},
    {InputKind::kReplayReport, "replay report", "replay reports", "replay_report"},
    {InputKind::kTrace, "trace", "traces", "trace"},
    {InputKind::kSnapshot, "PyTorch memory snapshot", "PyTorch memory snapshots", "snapshot"},
};

const KindNames& names_of(InputKind kind) {
  for (const auto& n : kKindNames)
    if (n.kind == kind)
      return n;
  return kKindNames[0];  // every kind is listed
}

}  // namespace

const char* kind_words(InputKind kind) {
  return names_of(kind).words;
}

const char* kind_plural(InputKind kind) {
  return names_of(kind).plural;
}

const char* kind_key(InputKind kind) {
  return names_of(kind).key;
}

bool kind_from_key(const std::string& key, InputKind& kind) {
  for (const auto& n : kKindNames)
    if (key == n.key) {
      kind = n.kind;
      return true;
    }
  return false;
}

Side read_side(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec))
    return read_folder(path);
  if (!fs::exists(path, ec))
    bad(path, "no such file or folder");
  const std::string bytes = read_bytes(path);
  if (bytes.empty())
    bad(path, "empty file");
  if (is_event_side(bytes))
    return read_event_side(bytes, path);
  const json doc = parse_json(bytes, path);
  const std::string schema = schema_of(doc);
  if (schema == kRepeat)
    return read_summary(doc, path);
  if (schema == kReplay)
    return read_replay(doc, path);
  for (const char* family : {kRepeat, kReplay})
    if (schema.rfind(std::string(family).substr(0, std::string(family).find('/') + 1), 0) == 0)
      expect_schema(doc, path, family);  // another version of that family
  expect_schema(doc, path, kReport);
  if (doc.contains("test"))
    bad(path,
        "a test's report: give the folder of test reports (OOMGUARD_REPORT_DIR), so that "
        "every test is compared");
  return Side{path, InputKind::kRunReport, {report_test(doc, "run", path)}};
}

}  // namespace oomguard::compare
