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

// Reads a trace into `trace` line by line, one event a line; an alloc in another phase than
// the current one comes after that phase's start.
class TraceReader {
 public:
  TraceReader(const std::string& source, Trace& trace)
      : source_(source), trace_(trace), phase_index_(trace.phases), tag_index_(trace.tags) {}

  // Line `line`, its text `text`.
  void read_line(int64_t line, const std::string& text) {
    line_ = line;
    if (text.find_first_not_of(" \t\r") == std::string::npos)
      return;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception&) {  // parse_error, out_of_range (a huge number)
      bad("not a JSON object; each line holds one event");
    }
    if (!j.is_object() || !j.contains("op") || !j["op"].is_string())
      bad("an event needs \"op\": \"alloc\", \"free\" or \"phase\"");
    const std::string op = j["op"].get<std::string>();
    if (op == "phase")
      trace_.events.push_back(phase_event(j));
    else if (op == "alloc")
      trace_.events.push_back(alloc_event(j));
    else if (op == "free")
      trace_.events.push_back(free_event(j));
    else if (op == "gemm")
      trace_.events.push_back(gemm_event(j));
    else
      bad("unknown op \"" + op + "\"; expected alloc, free, phase or gemm");
  }

 private:
  [[noreturn]] void bad(const std::string& why) const {
    throw TraceError(source_ + ":" + std::to_string(line_) + ": " + why);
  }
  int64_t integer(const nlohmann::json& j, const char* key, bool required, int64_t fallback) const {
    if (!j.contains(key)) {
      if (required)
        bad(std::string("\"") + key + "\" is missing");
      return fallback;
    }
    const auto& v = j[key];
    if (!v.is_number_integer() ||
        (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX}))
      bad(std::string("\"") + key + "\" must be an integer of at most 63 bits");
    return v.get<int64_t>();
  }
  std::string string(const nlohmann::json& j, const char* key) const {
    if (!j.contains(key))
      return {};
    if (!j[key].is_string())
      bad(std::string("\"") + key + "\" must be a string");
    return j[key].get<std::string>();
  }

  TraceEvent phase_event(const nlohmann::json& j) {
    const std::string name = string(j, "phase");
    if (name.empty())
      bad("a phase event needs \"phase\": a name");
    current_phase_ = phase_index_(name);
    return TraceEvent::phase_start(current_phase_, line_);
  }

  TraceEvent alloc_event(const nlohmann::json& j) {
    const int64_t id = integer(j, "id", true, 0);
    const int64_t bytes = integer(j, "bytes", true, 0);
    if (bytes < 0)
      bad("\"bytes\" must not be negative");
    const int64_t step = integer(j, "step", false, -1);
    const std::string phase = string(j, "phase");
    // A trace naming no phase at all is one phase, "trace".
    const int32_t p = !phase.empty()        ? phase_index_(phase)
                      : current_phase_ >= 0 ? current_phase_
                                            : phase_index_("trace");
    if (p != current_phase_) {
      current_phase_ = p;
      trace_.events.push_back(TraceEvent::phase_start(p, line_));
    }
    const int32_t tag = tag_index_(string(j, "tag"));
    const auto [it, added] = live_.emplace(id, trace_.slots);
    if (!added)
      bad("id " + std::to_string(id) + " is allocated again before its free");
    return TraceEvent::alloc(/*slot=*/trace_.slots++, bytes, id, /*phase=*/p, tag, step, line_);
  }

  TraceEvent free_event(const nlohmann::json& j) {
    const int64_t id = integer(j, "id", true, 0);
    const auto it = live_.find(id);
    if (it == live_.end())
      bad("free of id " + std::to_string(id) + ", which is not allocated");
    const int32_t slot = it->second;
    live_.erase(it);
    return TraceEvent::free(slot, id, line_);
  }

  TraceEvent gemm_event(const nlohmann::json& j) const {
    if (j.contains("backward") && !j["backward"].is_boolean())
      bad("\"backward\" must be true or false");
    return TraceEvent::gemm(j.value("backward", false), line_);
  }

  const std::string& source_;
  Trace& trace_;
  Interner phase_index_, tag_index_;
  std::unordered_map<int64_t, int32_t> live_;  // trace id -> slot
  int32_t current_phase_ = -1;
  int64_t line_ = 0;
};

}  // namespace

Trace read_trace(std::istream& in, const std::string& source) {
  Trace trace;
  trace.tags.emplace_back();
  TraceReader reader(source, trace);
  std::string text;
  int64_t line = 0;
  while (std::getline(in, text))
    reader.read_line(++line, text);
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
