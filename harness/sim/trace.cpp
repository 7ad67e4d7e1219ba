#include <oomguard/sim/trace.h>

#include <cstdint>
#include <unordered_map>

#include <nlohmann/json.hpp>

namespace oomguard::sim {
namespace {

class Interner {
 public:
  explicit Interner(std::vector<std::string>& names) : names_(names) {
    for (size_t i = 0; i < names_.size(); ++i)
      index_.emplace(names_[i], static_cast<int32_t>(i));
  }
  int32_t operator()(const std::string& name) {
    const auto [it, added] = index_.emplace(name, static_cast<int32_t>(names_.size()));
    if (added)
      names_.push_back(name);
    return it->second;
  }

 private:
  std::vector<std::string>& names_;
  std::unordered_map<std::string, int32_t> index_;
};

std::string quoted(std::string_view text) {
  return nlohmann::json(std::string(text)).dump();
}

}  // namespace

Trace read_trace(std::istream& in, const std::string& source) {
  Trace trace;
  trace.tags.emplace_back();
  Interner phase_index(trace.phases), tag_index(trace.tags);
  std::unordered_map<int64_t, int32_t> live;  // trace id -> slot
  int32_t current_phase = -1;
  std::string text;
  int64_t line = 0;
  const auto bad = [&](const std::string& why) {
    throw TraceError(source + ":" + std::to_string(line) + ": " + why);
  };
  while (std::getline(in, text)) {
    ++line;
    if (text.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception&) {  // parse_error, out_of_range (a huge number)
      bad("not a JSON object; each line holds one event");
    }
    if (!j.is_object() || !j.contains("op") || !j["op"].is_string())
      bad("an event needs \"op\": \"alloc\", \"free\" or \"phase\"");
    const auto integer = [&](const char* key, bool required, int64_t fallback) -> int64_t {
      if (!j.contains(key)) {
        if (required)
          bad(std::string("\"") + key + "\" is missing");
        return fallback;
      }
      const auto& v = j[key];
      if (!v.is_number_integer() ||
          (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX}))
        bad(std::string("\"") + key + "\" must be an integer of at most 63 bits");
      return j[key].get<int64_t>();
    };
    const auto string = [&](const char* key) -> std::string {
      if (!j.contains(key))
        return {};
      if (!j[key].is_string())
        bad(std::string("\"") + key + "\" must be a string");
      return j[key].get<std::string>();
    };
    const std::string op = j["op"].get<std::string>();
    TraceEvent e;
    e.line = line;
    if (op == "phase") {
      const std::string name = string("phase");
      if (name.empty())
        bad("a phase event needs \"phase\": a name");
      e.op = TraceEvent::Op::kPhase;
      e.phase = current_phase = phase_index(name);
    } else if (op == "alloc") {
      e.op = TraceEvent::Op::kAlloc;
      e.id = integer("id", true, 0);
      e.bytes = integer("bytes", true, 0);
      if (e.bytes < 0)
        bad("\"bytes\" must not be negative");
      e.step = integer("step", false, -1);
      const std::string phase = string("phase");
      // A trace naming no phase at all is one phase, "trace".
      const int32_t p = !phase.empty()       ? phase_index(phase)
                        : current_phase >= 0 ? current_phase
                                             : phase_index("trace");
      if (p != current_phase) {
        TraceEvent start;
        start.op = TraceEvent::Op::kPhase;
        start.phase = current_phase = p;
        start.line = line;
        trace.events.push_back(start);
      }
      e.phase = p;
      e.tag = tag_index(string("tag"));
      const auto [it, added] = live.emplace(e.id, trace.slots);
      if (!added)
        bad("id " + std::to_string(e.id) + " is allocated again before its free");
      e.slot = trace.slots++;
    } else if (op == "free") {
      e.op = TraceEvent::Op::kFree;
      e.id = integer("id", true, 0);
      const auto it = live.find(e.id);
      if (it == live.end())
        bad("free of id " + std::to_string(e.id) + ", which is not allocated");
      e.slot = it->second;
      live.erase(it);
    } else if (op == "gemm") {
      e.op = TraceEvent::Op::kGemm;
      if (j.contains("backward") && !j["backward"].is_boolean())
        bad("\"backward\" must be true or false");
      e.backward = j.value("backward", false);
    } else {
      bad("unknown op \"" + op + "\"; expected alloc, free, phase or gemm");
    }
    trace.events.push_back(e);
  }
  if (in.bad())
    throw TraceError(source + ": read error after line " + std::to_string(line));
  return trace;
}

std::string alloc_line(
    int64_t id, int64_t bytes, std::string_view phase, int64_t step, std::string_view tag) {
  return "{\"op\":\"alloc\",\"id\":" + std::to_string(id) + ",\"bytes\":" + std::to_string(bytes) +
         ",\"phase\":" + quoted(phase) + ",\"step\":" + std::to_string(step) +
         ",\"tag\":" + quoted(tag) + "}";
}

std::string free_line(int64_t id) {
  return "{\"op\":\"free\",\"id\":" + std::to_string(id) + "}";
}

std::string phase_line(std::string_view phase) {
  return "{\"op\":\"phase\",\"phase\":" + quoted(phase) + "}";
}

std::string gemm_line(bool backward) {
  return std::string("{\"op\":\"gemm\",\"backward\":") + (backward ? "true" : "false") + "}";
}

}  // namespace oomguard::sim
