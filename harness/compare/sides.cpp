#include "harness/compare/sides.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "harness/sim/pickle.h"
#include <oomguard/memory/sizes.h>
#include <oomguard/sim/allocator_settings.h>
#include <oomguard/sim/replay.h>
#include <oomguard/sim/snapshot.h>
#include <oomguard/sim/trace.h>

namespace oomguard::compare {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kReport = "oomguard.report/1";
constexpr const char* kRepeat = "oomguard.repeat/1";
constexpr const char* kReplay = "oomguard.replay/1";

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw InputError(path + ": " + what);
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    bad(path, "cannot be opened");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
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

std::string capacity_text(const json& v) {
  return v.is_number_integer() ? memory::format_size(v.get<int64_t>()) : text_of(v);
}

int64_t bytes_or_unknown(const json& phase, const char* key) {
  const auto it = phase.find(key);
  return it == phase.end() || it->is_null() ? kNoFigure : it->get<int64_t>();
}

// A report's phases (oomguard.report/1: the smoke run's and a test's alike).
std::vector<PhaseFigures> report_phases(const json& doc) {
  std::vector<PhaseFigures> phases;
  for (const auto& p : doc.at("phases")) {
    PhaseFigures f;
    f.name = p.at("name").get<std::string>();
    f.peak_allocated_bytes = p.at("peak_allocated_bytes").get<int64_t>();
    f.peak_reserved_bytes = bytes_or_unknown(p, "peak_reserved_bytes");
    const int64_t start = bytes_or_unknown(p, "start_allocated_bytes");
    const int64_t end = bytes_or_unknown(p, "end_allocated_bytes");
    f.growth_bytes = start != kNoFigure && end != kNoFigure ? end - start : kNoFigure;
    f.budget_bytes = bytes_or_unknown(p, "budget_bytes");
    f.status = p.value("status", "");
    const auto live = p.find("live_at_peak");
    f.tags_known = live != p.end() && live->is_array();
    if (f.tags_known)
      for (const auto& t : *live)
        f.live_at_peak.push_back({t.at("tag").get<std::string>(), t.at("bytes").get<int64_t>()});
    phases.push_back(std::move(f));
  }
  return phases;
}

// What a report's figures depend on, and what they may differ in.
TestFigures report_test(const json& doc, std::string name) {
  TestFigures t;
  t.name = std::move(name);
  const json info = doc.value("device_info", json::object());
  const auto info_text = [&](const char* key) {
    return info.contains(key) ? text_of(info[key]) : std::string("none");
  };
  t.conditions = {
      {"seed", text_of(doc.at("seed"))},
      {"device", text_of(doc.at("device"))},
      {"card", info_text("emulated_card")},
      {"capacity", capacity_text(doc.value("capacity_bytes", json()))},
      {"allocator settings", info_text("alloc_conf")},
      {"allocator model", info_text("allocator_model")},
      {"model rules", info_text("model_rules")}};
  t.context.emplace_back("LibTorch", text_of(doc.value("torch_version", json())));
  // The config holds the guards too; a test's report has neither.
  flatten(doc.value("config", json::object()), "", t.context);
  Facts guards;
  flatten(doc.value("guards", json::object()), "guards", guards);
  for (auto& g : guards)
    if (std::none_of(
            t.context.begin(), t.context.end(), [&](const auto& f) { return f.first == g.first; }))
      t.context.push_back(std::move(g));
  t.phases = report_phases(doc);
  return t;
}

// The report's schema, checked against the one expected of this kind of side.
void expect_schema(const json& doc, const std::string& path, const std::string& family) {
  const auto schema = doc.find("schema");
  if (!doc.is_object() || schema == doc.end() || !schema->is_string())
    bad(path, "not an oomguard report, summary or replay report (no \"schema\")");
  const auto s = schema->get<std::string>();
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

// A trace's first line is an event: {"op": ...}.
bool is_trace(const std::string& bytes) {
  const json line = json::parse(bytes.substr(0, bytes.find('\n')), nullptr, false);
  return line.is_object() && line.contains("op");
}

// A folder of GoogleTest layer reports: `<Suite.Name>.json` whose test is that name.
Side read_folder(const std::string& path) {
  Side side{path, InputKind::kTestReports, {}};
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(path, ec))
    if (entry.path().extension() == ".json")
      files.push_back(entry.path());
  if (ec)
    bad(path, "cannot be listed: " + ec.message());
  std::sort(files.begin(), files.end());
  for (const auto& file : files) {
    const json doc = parse_json(read_bytes(file.string()), file.string());
    if (!doc.is_object() || doc.value("schema", "").rfind("oomguard.report/", 0) != 0)
      continue;  // the budgets file, a summary: not a test's report
    expect_schema(doc, file.string(), kReport);
    const auto test = doc.find("test");
    if (test == doc.end() || !test->is_object())
      continue;  // a run report beside the tests' ones
    try {
      const auto name = test->at("name").get<std::string>();
      if (name + ".json" != file.filename().string())
        continue;  // a per-seed copy: the folder's <Suite.Name>.json is the test's latest run
      side.tests.push_back(report_test(doc, name));
    } catch (const json::exception& e) {
      bad(file.string(), std::string("a field is missing or of the wrong type: ") + e.what());
    }
  }
  if (side.tests.empty())
    bad(path, "no test reports in this folder (<Suite.Name>.json files of OOMGUARD_REPORT_DIR)");
  return side;
}

// A repeat summary: per phase the highest peak of any seed (its statistics).
Side read_summary(const json& doc, const std::string& path) {
  Side side{path, InputKind::kRepeatSummary, {}};
  TestFigures t;
  const json& plan = doc.at("plan");
  const json& stats = doc.at("statistics");
  t.name = "repeat (highest of " + text_of(stats.at("runs")) + " seeds)";
  t.conditions = {
      {"seeds from", text_of(plan.at("seed_start"))},
      {"runs", text_of(plan.at("runs"))},
      {"shard", text_of(plan.at("shard_index")) + "/" + text_of(plan.at("shard_count"))}};
  std::string args;
  for (const auto& a : plan.at("run_args"))
    args += (args.empty() ? "" : " ") + a.get<std::string>();
  t.context.emplace_back("run options", args.empty() ? "none" : args);
  std::map<std::string, int64_t> budgets;
  for (const auto& it : doc.at("iterations"))
    for (const auto& p : it.at("phases"))
      budgets.emplace(p.at("name").get<std::string>(), p.at("budget_bytes").get<int64_t>());
  for (const auto& p : stats.at("peaks")) {
    PhaseFigures f;
    f.name = p.at("phase").get<std::string>();
    f.peak_allocated_bytes = p.at("max_bytes").get<int64_t>();
    const auto budget = budgets.find(f.name);
    f.budget_bytes = budget == budgets.end() ? kNoFigure : budget->second;
    t.phases.push_back(std::move(f));
  }
  side.tests.push_back(std::move(t));
  return side;
}

// A replay report: one test per setting; the first has its phases, the others the whole
// trace as one phase (the report keeps per-phase figures of the first setting only).
Side read_replay(const json& doc, const std::string& path) {
  Side side{path, InputKind::kReplayReport, {}};
  const auto figures = [](const json& s, std::string name) {
    PhaseFigures f;
    f.name = std::move(name);
    f.peak_allocated_bytes = s.at("peak_allocated_bytes").get<int64_t>();
    f.peak_reserved_bytes = s.at("peak_reserved_bytes").get<int64_t>();
    f.status = s.value("outcome", "");
    return f;
  };
  const json settings = doc.value("settings", json::array({doc}));
  for (size_t i = 0; i < settings.size(); ++i) {
    const json& s = settings[i];
    TestFigures t;
    t.name =
        (s.at("card").is_null() ? text_of(s.at("capacity_bytes")) + " B"
                                : s.at("card").get<std::string>()) +
        " " +
        (s.at("alloc_conf").get<std::string>().empty() ? "default"
                                                       : s.at("alloc_conf").get<std::string>());
    t.conditions = {{"modelled LibTorch", text_of(s.at("torch_version"))}};
    if (i == 0)
      for (const auto& p : doc.at("phases"))
        t.phases.push_back(figures(p, p.at("name").get<std::string>()));
    else
      t.phases.push_back(figures(s, "(whole trace)"));
    side.tests.push_back(std::move(t));
  }
  return side;
}

// A snapshot's frame "forward (model.py:42)" as "forward (model.py)": a change that moves
// the line (a line added above it) is not a change of what was live.
std::string without_line(const std::string& frame) {
  const size_t colon = frame.rfind(':');
  if (frame.empty() || frame.back() != ')' || colon == std::string::npos ||
      frame.find(" (") == std::string::npos || colon < frame.rfind(" ("))
    return frame;
  return frame.substr(0, colon) + ")";
}

// A trace or snapshot, replayed for the reserved figure. A phase's growth: the requested
// bytes where the next phase begins minus where it began; the last phase has none (a trace
// does not say where it ended, and what follows it is the program's teardown).
Side read_events(const std::string& bytes, const std::string& path) {
  const bool snapshot = sim::looks_like_pickle(bytes);
  Side side{path, snapshot ? InputKind::kSnapshot : InputKind::kTrace, {}};
  sim::Trace trace;
  sim::SnapshotInfo info;
  try {
    if (snapshot) {
      trace = sim::read_snapshot(bytes, path, info);
    } else {
      std::istringstream in(bytes);
      trace = sim::read_trace(in, path);
    }
  } catch (const sim::TraceError& e) {
    throw InputError(e.what());
  }
  const auto settings = sim::AllocatorSettings::parse(info.alloc_conf);
  sim::Timeline timeline;
  constexpr int64_t kNoLimit = int64_t{1} << 50;  // a replay for figures, not for a card
  const auto r = sim::replay(trace, settings, sim::DeviceLimits::capacity(kNoLimit), &timeline);

  std::map<std::string, int64_t> growth;
  int32_t current = -1;
  int64_t started = 0;
  for (size_t i = 0; i < timeline.requested.size(); ++i) {
    const auto& ev = trace.events[i];
    const bool starts =
        ev.op == sim::TraceEvent::Op::kPhase || ev.op == sim::TraceEvent::Op::kAlloc;
    if (!starts || ev.phase == current)
      continue;
    const int64_t before = i == 0 ? 0 : timeline.requested[i - 1];
    if (current >= 0)
      growth[trace.phases[static_cast<size_t>(current)]] = before - started;
    current = ev.phase;
    started = before;
  }
  TestFigures t;
  t.name = snapshot ? "snapshot" : "trace";
  if (snapshot)
    t.conditions = {{"allocator settings", info.alloc_conf.empty() ? "default" : info.alloc_conf}};
  for (const auto& p : r.phases) {
    PhaseFigures f;
    f.name = p.name;
    f.peak_allocated_bytes = p.peak_requested_bytes;
    f.peak_reserved_bytes = p.peak_reserved_bytes;
    const auto g = growth.find(p.name);
    if (g != growth.end())
      f.growth_bytes = g->second;
    f.status = r.oom && r.oom->phase == p.name ? "oom" : "";
    f.tags_known = true;
    for (const auto& tag : p.live_at_peak) {
      const std::string name = snapshot ? without_line(tag.tag) : tag.tag;
      const auto same = std::find_if(
          f.live_at_peak.begin(), f.live_at_peak.end(), [&](auto& t) { return t.tag == name; });
      if (same == f.live_at_peak.end())
        f.live_at_peak.push_back({name, tag.bytes});
      else
        same->bytes += tag.bytes;
    }
    t.phases.push_back(std::move(f));
  }
  side.tests.push_back(std::move(t));
  return side;
}

}  // namespace

const char* kind_words(InputKind kind) {
  switch (kind) {
    case InputKind::kRunReport:
      return "run report";
    case InputKind::kTestReports:
      return "folder of test reports";
    case InputKind::kRepeatSummary:
      return "repeat summary";
    case InputKind::kReplayReport:
      return "replay report";
    case InputKind::kTrace:
      return "trace";
    case InputKind::kSnapshot:
      return "PyTorch memory snapshot";
  }
  return "?";
}

const char* kind_key(InputKind kind) {
  switch (kind) {
    case InputKind::kRunReport:
      return "run_report";
    case InputKind::kTestReports:
      return "test_reports";
    case InputKind::kRepeatSummary:
      return "repeat_summary";
    case InputKind::kReplayReport:
      return "replay_report";
    case InputKind::kTrace:
      return "trace";
    case InputKind::kSnapshot:
      return "snapshot";
  }
  return "?";
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
  if (sim::looks_like_pickle(bytes) || is_trace(bytes))
    return read_events(bytes, path);
  const json doc = parse_json(bytes, path);
  try {
    const std::string schema = doc.value("schema", "");
    if (schema == kRepeat)
      return read_summary(doc, path);
    if (schema == kReplay)
      return read_replay(doc, path);
    for (const char* family : {kRepeat, kReplay, kReport})
      if (schema.rfind(std::string(family).substr(0, std::string(family).find('/') + 1), 0) == 0)
        expect_schema(doc, path, family);  // another version of that family
    expect_schema(doc, path, kReport);
    if (doc.contains("test"))
      bad(path,
          "a test's report: give the folder of test reports (OOMGUARD_REPORT_DIR), so that "
          "every test is compared");
    return Side{path, InputKind::kRunReport, {report_test(doc, "run")}};
  } catch (const json::exception& e) {
    bad(path, std::string("a field is missing or of the wrong type: ") + e.what());
  }
}

}  // namespace oomguard::compare
