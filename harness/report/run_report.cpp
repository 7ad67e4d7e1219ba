#include "harness/report/run_report.h"

#include "harness/atomic_file.h"
#include "harness/report/json_fields.h"

namespace oomguard::report {
namespace {

using nlohmann::json;
using report::or_null;  // the text form, beside the bytes' form below

json or_null(int64_t v) {
  return v < 0 ? json(nullptr) : json(v);
}

json phase_json(const PhaseRecord& p) {
  json live = nullptr;
  if (p.live_at_peak) {
    live = json::array();
    for (const memory::TagBytes& t : *p.live_at_peak)
      live.push_back({{"tag", t.tag}, {"bytes", t.bytes}});
  }
  json j = p.extra.is_object() ? p.extra : json::object();
  j.update({
      {"name", p.name},
      {"status", memory::to_string(p.status)},
      {"start_allocated_bytes", p.start_allocated_bytes},
      {"peak_allocated_bytes", p.peak_allocated_bytes},
      {"end_allocated_bytes", p.end_allocated_bytes},
      {"budget_bytes", p.budget_bytes},
      {"peak_reserved_bytes", or_null(p.peak_reserved_bytes)},
      {"predicted_peak_allocated_bytes", or_null(p.predicted_peak_allocated_bytes)},
      {"num_alloc_retries", p.num_alloc_retries},
      {"steps", p.steps},
      {"wall_seconds", p.wall_seconds},
      {"live_at_peak", live},
  });
  return j;
}

json device_json(const DeviceInfo& d) {
  return {
      {"type", memory::to_string(d.type)},
      {"name", or_null(d.name)},
      {"total_bytes", or_null(d.total_bytes)},
      {"emulated_card", or_null(d.card)},
      {"alloc_conf", or_null(d.alloc_conf)},
      {"alloc_conf_source", or_null(d.alloc_conf_source)},
      {"allocator_model", or_null(d.allocator_model)},
      {"model_cublas_workspace", or_null(d.model_workspace)},
      {"model_rules", or_null(d.model_rules)},
      {"segments", or_null(d.segments)},
      {"expandable_segments", or_null(d.expandable_segments)},
      {"alloc_conf_effect", or_null(d.alloc_conf_effect)}};
}

// The fields phase_json writes itself; everything else of a phase is its `extra`.
bool is_phase_field(const std::string& key) {
  for (const char* k :
       {"name",
        "status",
        "start_allocated_bytes",
        "peak_allocated_bytes",
        "end_allocated_bytes",
        "budget_bytes",
        "peak_reserved_bytes",
        "predicted_peak_allocated_bytes",
        "num_alloc_retries",
        "steps",
        "wall_seconds",
        "live_at_peak"})
    if (key == k)
      return true;
  return false;
}

memory::PhaseStatus status_of(
    const Fields& f, const json& j, const char* key, const std::string& where) {
  const std::string text = f.text(j, key, where);
  try {
    return memory::phase_status_from_string(text);
  } catch (const std::invalid_argument& e) {
    f.bad(where + "." + key + ": " + e.what());
  }
}

PhaseRecord read_phase(const Fields& f, const json& j) {
  PhaseRecord p;
  p.name = f.text(j, "name", "a phase");
  const std::string where = "phase " + p.name;
  p.status = status_of(f, j, "status", where);
  p.start_allocated_bytes = f.bytes(j, "start_allocated_bytes", where, false);
  p.peak_allocated_bytes = f.bytes(j, "peak_allocated_bytes", where, false);
  p.end_allocated_bytes = f.bytes(j, "end_allocated_bytes", where, false);
  p.budget_bytes = f.bytes(j, "budget_bytes", where, false);
  p.peak_reserved_bytes = f.bytes(j, "peak_reserved_bytes", where, true);
  p.predicted_peak_allocated_bytes = f.bytes(j, "predicted_peak_allocated_bytes", where, true);
  p.num_alloc_retries = f.integer(j, "num_alloc_retries", where);
  p.steps = f.integer(j, "steps", where);
  p.wall_seconds = f.number(j, "wall_seconds", where);
  if (j.contains("live_at_peak") && !j["live_at_peak"].is_null()) {
    p.live_at_peak.emplace();
    for (const json& t : f.array(j, "live_at_peak", where))
      p.live_at_peak->push_back(
          {f.text(t, "tag", where + " live_at_peak"),
           f.bytes(t, "bytes", where + " live_at_peak", false)});
  }
  for (const auto& [key, value] : j.items())
    if (!is_phase_field(key))
      p.extra[key] = value;
  return p;
}

DeviceInfo read_device(const Fields& f, const json& doc) {
  const std::string where = "the report.device_info";
  const json& j = f.at(doc, "device_info", "the report");
  if (!j.is_object())
    f.bad(where + " is not an object");
  DeviceInfo d;
  try {
    d.type = memory::device_kind_from_string(f.text(j, "type", where));
  } catch (const std::invalid_argument& e) {
    f.bad(where + ".type: " + e.what());
  }
  d.name = f.text_or_empty(j, "name", where);
  d.total_bytes = f.bytes(j, "total_bytes", where, true);
  d.card = f.text_or_empty(j, "emulated_card", where);
  d.alloc_conf = f.text_or_empty(j, "alloc_conf", where);
  d.alloc_conf_source = f.text_or_empty(j, "alloc_conf_source", where);
  d.allocator_model = f.text_or_empty(j, "allocator_model", where);
  d.model_workspace = f.text_or_empty(j, "model_cublas_workspace", where);
  d.model_rules = f.text_or_empty(j, "model_rules", where);
  d.segments = f.bytes(j, "segments", where, true);
  d.expandable_segments = f.bytes(j, "expandable_segments", where, true);
  d.alloc_conf_effect = f.text_or_empty(j, "alloc_conf_effect", where);
  return d;
}

}  // namespace

json to_json(const RunRecord& r) {
  json phases = json::array();
  for (const PhaseRecord& p : r.phases)
    phases.push_back(phase_json(p));
  json rules = json::array();
  for (const sim::RuleEffect& rule : r.budget_rules)
    rules.push_back({{"name", rule.name}, {"bytes", rule.bytes}, {"detail", rule.detail}});
  json oom = nullptr;
  if (r.oom) {
    oom = r.oom->extra.is_object() ? r.oom->extra : json::object();
    oom.update(
        {{"phase", r.oom->phase},
         {"requested_bytes", r.oom->requested_bytes},
         {"message", r.oom->message}});
  }
  json device_error = nullptr;
  if (r.device_error)
    device_error = {{"phase", r.device_error->phase}, {"message", r.device_error->message}};
  json doc = {
      {"schema", kRunReportSchema},
      {"outcome", memory::to_string(r.outcome)},
      {"seed", r.seed ? json(*r.seed) : json(nullptr)},
      {"device", memory::to_string(r.device.type)},
      {"device_info", device_json(r.device)},
      {"torch_version", r.torch_version},
      {"capacity_bytes", r.capacity_bytes},
      {"guards", r.guards},
      {"config", r.config},
      {"phases", phases},
      {"budget_rules", rules},
      {"device_error", device_error},
      {"oom", oom}};
  if (!r.test_name.empty())
    doc["test"] = {{"name", r.test_name}, {"source", r.test_source}};
  if (!r.worst_case.is_null())
    doc["worst_case"] = r.worst_case;
  if (r.unsupported)
    doc["unsupported"] = {
        {"phase", r.unsupported->phase},
        {"operator", r.unsupported->op},
        {"message", r.unsupported->message}};
  return doc;
}

void write_run_record(const RunRecord& record, const std::string& path) {
  write_file_atomically(path, to_json(record).dump(2) + "\n");
}

RunRecord run_record_from_json(const json& doc, const std::string& source) {
  const Fields f(source);
  const std::string schema = schema_of(doc);
  if (schema != kRunReportSchema)
    f.bad(
        schema.empty() ? "not an oomguard report (no \"schema\")"
                       : "schema " + schema + " is not " + kRunReportSchema);
  const std::string where = "the report";
  RunRecord r;
  if (doc.contains("test")) {
    r.test_name = f.text(f.at(doc, "test", where), "name", "the report.test");
    r.test_source = f.text(doc["test"], "source", "the report.test");
  }
  r.outcome = status_of(f, doc, "outcome", where);
  if (f.at(doc, "seed", where).is_null()) {
    r.seed.reset();
  } else {
    const int64_t seed = f.integer(doc, "seed", where);
    if (seed < 0)
      f.bad("the report.seed is negative");
    r.seed = static_cast<uint64_t>(seed);
  }
  if (doc.contains("worst_case") && !doc["worst_case"].is_null())
    r.worst_case = f.object(doc, "worst_case", where);
  r.device = read_device(f, doc);
  r.torch_version = f.text(doc, "torch_version", where);
  r.capacity_bytes = f.bytes(doc, "capacity_bytes", where, false);
  r.guards = f.object(doc, "guards", where);
  r.config = f.object(doc, "config", where);
  for (const json& p : f.array(doc, "phases", where))
    r.phases.push_back(read_phase(f, p));
  if (doc.contains("budget_rules"))
    for (const json& rule : f.array(doc, "budget_rules", where))
      r.budget_rules.push_back(
          {f.text(rule, "name", "a budget rule"),
           f.bytes(rule, "bytes", "a budget rule", false),
           f.text(rule, "detail", "a budget rule")});
  if (doc.contains("device_error") && !doc["device_error"].is_null()) {
    const json& e = doc["device_error"];
    r.device_error = DeviceErrorRecord{
        f.text(e, "phase", "the report.device_error"),
        f.text(e, "message", "the report.device_error")};
  }
  if (doc.contains("unsupported") && !doc["unsupported"].is_null()) {
    const json& u = doc["unsupported"];
    r.unsupported = UnsupportedRecord{
        f.text(u, "phase", "the report.unsupported"),
        f.text(u, "operator", "the report.unsupported"),
        f.text(u, "message", "the report.unsupported")};
  }
  if (!f.at(doc, "oom", where).is_null()) {
    const json& o = doc["oom"];
    OomRecord oom;
    oom.phase = f.text(o, "phase", "the report.oom");
    oom.requested_bytes = f.integer(o, "requested_bytes", "the report.oom");
    oom.message = f.text(o, "message", "the report.oom");
    for (const auto& [key, value] : o.items())
      if (key != "phase" && key != "requested_bytes" && key != "message")
        oom.extra[key] = value;
    r.oom = std::move(oom);
  }
  return r;
}

}  // namespace oomguard::report
