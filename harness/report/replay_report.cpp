#include "harness/report/replay_report.h"

#include <algorithm>

#include "harness/report/json_fields.h"

namespace oomguard::report {
namespace {

using nlohmann::json;

json figures_json(const ReplayFigures& f) {
  return {
      {"card", or_null(f.card)},
      {"capacity_bytes", f.capacity_bytes},
      {"alloc_conf", f.alloc_conf},
      {"torch_version", f.torch_version},
      {"events", f.events},
      {"peak_requested_bytes", f.peak_requested_bytes},
      {"peak_allocated_bytes", f.peak_allocated_bytes},
      {"peak_reserved_bytes", f.peak_reserved_bytes},
      {"largest_gap_bytes", f.largest_gap_bytes},
      {"largest_gap_line", f.largest_gap_line},
      {"num_alloc_retries", f.num_alloc_retries},
      {"num_ooms", f.num_ooms},
      {"cublas_workspace_bytes", f.cublas_workspace_bytes},
      {"cublas_workspace", or_null(f.cublas_workspace)},
      {"outcome", f.fits() ? "pass" : "oom"},
      {"margin_bytes", f.fits() ? json(f.capacity_bytes - f.peak_reserved_bytes) : json(nullptr)},
      {"oom", f.oom}};
}

ReplayFigures read_figures(const Fields& f, const json& j, const std::string& where) {
  ReplayFigures r;
  const json& card = f.at(j, "card", where);
  if (!card.is_null())
    r.card = f.text(j, "card", where);
  r.capacity_bytes = f.bytes(j, "capacity_bytes", where, false);
  r.alloc_conf = f.text(j, "alloc_conf", where);
  r.torch_version = f.text(j, "torch_version", where);
  r.events = f.integer(j, "events", where);
  r.peak_requested_bytes = f.bytes(j, "peak_requested_bytes", where, false);
  r.peak_allocated_bytes = f.bytes(j, "peak_allocated_bytes", where, false);
  r.peak_reserved_bytes = f.bytes(j, "peak_reserved_bytes", where, false);
  r.largest_gap_bytes = f.bytes(j, "largest_gap_bytes", where, false);
  r.largest_gap_line = f.integer(j, "largest_gap_line", where);
  r.num_alloc_retries = f.integer(j, "num_alloc_retries", where);
  r.num_ooms = f.integer(j, "num_ooms", where);
  r.cublas_workspace_bytes =
      std::max<int64_t>(0, f.bytes(j, "cublas_workspace_bytes", where, true));
  r.cublas_workspace = f.text_or_empty(j, "cublas_workspace", where);
  r.oom = f.at(j, "oom", where);
  if (!r.oom.is_null() && !r.oom.is_object())
    f.bad(where + ".oom is not an object");
  return r;
}

}  // namespace

json to_json(const ReplayRecord& r) {
  json phases = json::array();
  for (const ReplayPhase& p : r.phases) {
    json live = json::array();
    for (const memory::TagBytes& t : p.live_at_peak)
      live.push_back({{"tag", t.tag}, {"bytes", t.bytes}});
    phases.push_back(
        {{"name", p.name},
         {"peak_requested_bytes", p.peak_requested_bytes},
         {"peak_allocated_bytes", p.peak_allocated_bytes},
         {"peak_reserved_bytes", p.peak_reserved_bytes},
         {"largest_gap_bytes", p.largest_gap_bytes},
         {"num_alloc_retries", p.num_alloc_retries},
         {"live_at_peak", live}});
  }
  json doc = {{"schema", kReplayReportSchema}, {"trace", r.trace}};
  if (!r.settings.empty())
    doc.update(figures_json(r.settings.front()));
  doc["phases"] = phases;
  json settings = json::array();
  for (const ReplayFigures& s : r.settings)
    settings.push_back(figures_json(s));
  doc["settings"] = settings;
  if (!r.snapshot.is_null())
    doc["snapshot"] = r.snapshot;
  return doc;
}

ReplayRecord replay_record_from_json(const json& doc, const std::string& source) {
  const Fields f(source);
  const std::string schema = schema_of(doc);
  if (schema != kReplayReportSchema)
    f.bad(
        schema.empty() ? "not an oomguard replay report (no \"schema\")"
                       : "schema " + schema + " is not " + kReplayReportSchema);
  ReplayRecord r;
  r.trace = f.text(doc, "trace", "the report");
  if (doc.contains("settings")) {
    const json& settings = f.array(doc, "settings", "the report");
    for (size_t i = 0; i < settings.size(); ++i)
      r.settings.push_back(read_figures(f, settings[i], "setting " + std::to_string(i + 1)));
  }
  if (r.settings.empty())
    r.settings.push_back(read_figures(f, doc, "the report"));
  for (const json& p : f.array(doc, "phases", "the report")) {
    ReplayPhase ph;
    ph.name = f.text(p, "name", "a phase");
    const std::string where = "phase " + ph.name;
    ph.peak_requested_bytes = f.bytes(p, "peak_requested_bytes", where, false);
    ph.peak_allocated_bytes = f.bytes(p, "peak_allocated_bytes", where, false);
    ph.peak_reserved_bytes = f.bytes(p, "peak_reserved_bytes", where, false);
    ph.largest_gap_bytes = f.bytes(p, "largest_gap_bytes", where, false);
    ph.num_alloc_retries = f.integer(p, "num_alloc_retries", where);
    if (p.contains("live_at_peak") && !p["live_at_peak"].is_null())
      for (const json& t : f.array(p, "live_at_peak", where))
        ph.live_at_peak.push_back(
            {f.text(t, "tag", where + " live_at_peak"),
             f.bytes(t, "bytes", where + " live_at_peak", false)});
    r.phases.push_back(std::move(ph));
  }
  if (doc.contains("snapshot"))
    r.snapshot = doc["snapshot"];
  return r;
}

}  // namespace oomguard::report
