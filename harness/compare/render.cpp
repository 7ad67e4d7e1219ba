#include "harness/compare/render.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <oomguard/memory/sizes.h>

namespace oomguard::compare {
namespace {

using nlohmann::json;

std::string percent_text(const Delta& d) {
  if (!d.known())
    return "";
  const double p = d.percent();
  if (std::isinf(p))
    return "new";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%", p);
  return buf;
}

std::string bytes_or_dash(int64_t bytes) {
  return bytes == kNoFigure ? "-" : memory::format_size(bytes);
}

// "17.47MiB -> 81.47MiB", or one side with what the other lacks.
std::string from_to(const Delta& d, const char* arrow) {
  if (d.base == kNoFigure && d.head == kNoFigure)
    return "";
  if (d.base == d.head)
    return memory::format_size(d.base);
  return bytes_or_dash(d.base) + " " + arrow + " " + bytes_or_dash(d.head);
}

std::string delta_text(const Delta& d) {
  return d.known() ? signed_size(d.bytes()) : "";
}

// "mixer +64MiB, (untagged) +1MiB": the largest movers of what was live at the peak.
std::string movers(const PhaseChange& p, size_t most, bool code) {
  if (!p.tags_known)
    return "";
  std::string out;
  for (size_t i = 0; i < p.tag_moves.size() && i < most; ++i) {
    const auto& m = p.tag_moves[i];
    std::string tag = m.tag;
    if (code) {
      for (char& ch : tag)
        ch = ch == '`' ? '\'' : ch;
      tag = "`" + tag + "`";
    }
    out += (i ? ", " : "") + tag + " " + signed_size(m.delta());
  }
  return out;
}

std::string verdict(const Comparison& c) {
  const auto over = c.over_limit();
  if (!over.empty())
    return std::to_string(over.size()) + (over.size() == 1 ? " phase" : " phases") +
           " over the limit";
  if (!c.changed())
    return "no change";
  const auto changed = c.largest_changes().size();
  return std::to_string(changed) + (changed == 1 ? " phase" : " phases") + " changed" +
         (c.limits.empty() ? "" : ", none over the limit");
}

std::string limits_text(const Comparison& c) {
  std::string out;
  for (const auto& l : c.limits)
    out += (out.empty() ? "" : ", ") + l.text;
  return out;
}

std::string facts_text(const Facts& facts) {
  std::string out;
  for (const auto& [k, v] : facts)
    out += (out.empty() ? "" : ", ") + k + " " + v;
  return out;
}

std::string presence_text(const PhaseChange& p) {
  if (p.presence == Presence::kBaseOnly)
    return "only in base";
  if (p.presence == Presence::kHeadOnly)
    return "only in head";
  if (p.base_status != p.head_status)
    return p.base_status + " -> " + p.head_status;
  return "";
}

// ---- Markdown -----------------------------------------------------------------------------

std::string cell(std::string text) {
  std::string out;
  for (char ch : text) {
    if (ch == '|')
      out += "\\|";
    else if (ch == '\n')
      out += ' ';
    else
      out += ch;
  }
  return out;
}

std::string markdown_table(const std::vector<const PhaseChange*>& rows) {
  std::string t =
      "| | test | phase | peak allocated | Δ | Δ% | reserved | growth Δ | live at the peak: "
      "largest "
      "changes |\n|---|---|---|---:|---:|---:|---:|---:|---|\n";
  for (const PhaseChange* p : rows) {
    const std::string mark = p->over_limit ? "**over " + p->limit + "**" : presence_text(*p);
    t += "| " + cell(mark) + " | " + cell(p->test) + " | " + cell(p->phase) + " | " +
         cell(from_to(p->peak_allocated, "→")) + " | " + delta_text(p->peak_allocated) + " | " +
         percent_text(p->peak_allocated) + " | " + cell(from_to(p->peak_reserved, "→")) + " | " +
         delta_text(p->growth) + " | " + cell(movers(*p, 3, true)) + " |\n";
  }
  return t;
}

json delta_json(const Delta& d) {
  const auto side = [](int64_t v) { return v == kNoFigure ? json(nullptr) : json(v); };
  const double p = d.percent();
  return {
      {"base", side(d.base)},
      {"head", side(d.head)},
      {"delta", d.known() ? json(d.bytes()) : json(nullptr)},
      {"percent", d.known() && !std::isinf(p) ? json(p) : json(nullptr)}};
}

Delta delta_from(const json& j) {
  const auto side = [](const json& v) { return v.is_null() ? kNoFigure : v.get<int64_t>(); };
  return Delta{side(j.at("base")), side(j.at("head"))};
}

const char* presence_key(Presence p) {
  return p == Presence::kBoth ? "both" : p == Presence::kBaseOnly ? "base_only" : "head_only";
}

json text_or_null(const std::string& s) {
  return s.empty() ? json(nullptr) : json(s);
}

}  // namespace

std::string signed_size(int64_t bytes) {
  return (bytes > 0 ? "+" : bytes < 0 ? "-" : "") + memory::format_size(std::llabs(bytes));
}

std::string render_text(const Comparison& c) {
  std::string out = "oomguard compare: base " + c.base.path + ", head " + c.head.path + " (" +
                    kind_words(c.base.kind) + "s)\n";
  if (!c.conditions.empty())
    out += "measured under: " + facts_text(c.conditions) + "\n";
  for (const auto& n : c.notes)
    out += "differs: " + n + "\n";
  const auto rows = c.largest_changes();
  if (!rows.empty()) {
    char line[512];
    std::snprintf(
        line,
        sizeof line,
        "%-30s %-10s %24s %11s %8s %24s %11s  %s\n",
        "test",
        "phase",
        "peak allocated",
        "delta",
        "delta%",
        "reserved",
        "growth",
        "live at the peak");
    out += line;
    for (const PhaseChange* p : rows) {
      std::snprintf(
          line,
          sizeof line,
          "%-30s %-10s %24s %11s %8s %24s %11s  %s",
          p->test.c_str(),
          p->phase.c_str(),
          from_to(p->peak_allocated, "->").c_str(),
          delta_text(p->peak_allocated).c_str(),
          percent_text(p->peak_allocated).c_str(),
          from_to(p->peak_reserved, "->").c_str(),
          delta_text(p->growth).c_str(),
          movers(*p, 3, false).c_str());
      out += line;
      const std::string presence = presence_text(*p);
      out += presence.empty() ? "\n" : "  [" + presence + "]\n";
    }
  }
  for (const auto& t : c.tests_only_in_base)
    out += "only in base: " + t + "\n";
  for (const auto& t : c.tests_only_in_head)
    out += "only in head: " + t + "\n";
  for (const PhaseChange* p : c.over_limit())
    out += "over the limit " + p->limit + ": " + c.label(*p) + " " + delta_text(p->peak_allocated) +
           " (" + percent_text(p->peak_allocated) + ")" +
           (p->tag_moves.empty() ? "" : ": " + movers(*p, 1, false)) + "\n";
  return out + "outcome: " + verdict(c) + "\n";
}

std::string render_markdown(const Comparison& c, size_t shown) {
  std::string md = std::string(kMarkdownMarker) + "\n### oomguard: memory, base vs head\n\n";
  const auto over = c.over_limit();
  md += "**" + verdict(c) + "**";
  if (!c.limits.empty())
    md += " (limit " + cell(limits_text(c)) + ", peak allocated)";
  for (const PhaseChange* p : over)
    md += "; " + cell(c.label(*p)) + " " + delta_text(p->peak_allocated) +
          (p->tag_moves.empty() ? "" : " (" + cell(movers(*p, 1, true)) + ")");
  md += "\n\n";
  const auto rows = c.largest_changes();
  if (!rows.empty()) {
    const size_t first = std::min(shown, rows.size());
    md += markdown_table({rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(first)});
    if (rows.size() > first)
      md += "\n<details><summary>" + std::to_string(rows.size() - first) +
            " smaller changes</summary>\n\n" +
            markdown_table({rows.begin() + static_cast<std::ptrdiff_t>(first), rows.end()}) +
            "\n</details>\n";
    const size_t same = c.phases.size() - rows.size();
    if (same > 0)
      md += "\n" + std::to_string(same) + " other " + (same == 1 ? "phase" : "phases") +
            " unchanged.\n";
  }
  for (const auto& t : c.tests_only_in_base)
    md += "\n- only in base: `" + cell(t) + "`";
  for (const auto& t : c.tests_only_in_head)
    md += "\n- only in head: `" + cell(t) + "`";
  if (!c.tests_only_in_base.empty() || !c.tests_only_in_head.empty())
    md += "\n";
  md += "\n<sub>" + std::string(kind_words(c.base.kind)) + "s `" + cell(c.base.path) +
        "` (base) and `" + cell(c.head.path) + "` (head)";
  if (!c.conditions.empty())
    md += "; measured under " + cell(facts_text(c.conditions));
  for (const auto& n : c.notes)
    md += "; differs: " + cell(n);
  return md + ". Exact bytes: the figures are deterministic for a seed.</sub>\n";
}

json to_json(const Comparison& c) {
  json phases = json::array();
  for (const auto& p : c.phases) {
    json moves = json::array();
    for (const auto& m : p.tag_moves)
      moves.push_back(
          {{"tag", m.tag},
           {"base_bytes", m.base_bytes},
           {"head_bytes", m.head_bytes},
           {"delta_bytes", m.delta()}});
    phases.push_back(
        {{"test", p.test},
         {"phase", p.phase},
         {"presence", presence_key(p.presence)},
         {"base_status", text_or_null(p.base_status)},
         {"head_status", text_or_null(p.head_status)},
         {"peak_allocated_bytes", delta_json(p.peak_allocated)},
         {"peak_reserved_bytes", delta_json(p.peak_reserved)},
         {"growth_bytes", delta_json(p.growth)},
         {"budget_bytes", delta_json(p.budget)},
         {"tags_known", p.tags_known},
         {"tag_moves", moves},
         {"limit", text_or_null(p.limit)},
         {"over_limit", p.over_limit},
         {"changed", p.changed()}});
  }
  json limits = json::array();
  for (const auto& l : c.limits)
    limits.push_back(
        {{"text", l.text},
         {"phase", text_or_null(l.phase)},
         {"percent", l.percent >= 0 ? json(l.percent) : json(nullptr)},
         {"bytes", l.bytes >= 0 ? json(l.bytes) : json(nullptr)}});
  json conditions = json::object();
  for (const auto& [k, v] : c.conditions)
    conditions[k] = v;
  return {
      {"schema", "oomguard.compare/1"},
      {"outcome",
       !c.over_limit().empty() ? "over_limit"
       : c.changed()           ? "changed"
                               : "no_change"},
      {"base", {{"path", c.base.path}, {"kind", kind_key(c.base.kind)}}},
      {"head", {{"path", c.head.path}, {"kind", kind_key(c.head.kind)}}},
      {"conditions", conditions},
      {"notes", c.notes},
      {"limits", limits},
      {"phases", phases},
      {"tests_only_in_base", c.tests_only_in_base},
      {"tests_only_in_head", c.tests_only_in_head}};
}

Comparison from_json(const json& doc, const std::string& source) {
  if (!doc.is_object() || doc.value("schema", "") != "oomguard.compare/1")
    throw InputError(source + ": not a comparison (oomguard.compare/1)");
  const auto kind_of = [&](const json& side) {
    const auto key = side.at("kind").get<std::string>();
    for (auto k :
         {InputKind::kRunReport,
          InputKind::kTestReports,
          InputKind::kRepeatSummary,
          InputKind::kReplayReport,
          InputKind::kTrace,
          InputKind::kSnapshot})
      if (key == kind_key(k))
        return k;
    throw InputError(source + ": unknown kind " + key);
  };
  const auto text = [](const json& v) {
    return v.is_null() ? std::string() : v.get<std::string>();
  };
  Comparison c;
  try {
    c.base = {doc.at("base").at("path").get<std::string>(), kind_of(doc.at("base"))};
    c.head = {doc.at("head").at("path").get<std::string>(), kind_of(doc.at("head"))};
    for (const auto& [k, v] : doc.at("conditions").items())
      c.conditions.emplace_back(k, v.get<std::string>());
    c.notes = doc.at("notes").get<std::vector<std::string>>();
    for (const auto& l : doc.at("limits"))
      c.limits.push_back(
          {text(l.at("phase")),
           l.at("percent").is_null() ? -1.0 : l.at("percent").get<double>(),
           l.at("bytes").is_null() ? int64_t{-1} : l.at("bytes").get<int64_t>(),
           l.at("text").get<std::string>()});
    for (const auto& j : doc.at("phases")) {
      PhaseChange p;
      p.test = j.at("test").get<std::string>();
      p.phase = j.at("phase").get<std::string>();
      const auto presence = j.at("presence").get<std::string>();
      p.presence = presence == "base_only"   ? Presence::kBaseOnly
                   : presence == "head_only" ? Presence::kHeadOnly
                                             : Presence::kBoth;
      p.base_status = text(j.at("base_status"));
      p.head_status = text(j.at("head_status"));
      p.peak_allocated = delta_from(j.at("peak_allocated_bytes"));
      p.peak_reserved = delta_from(j.at("peak_reserved_bytes"));
      p.growth = delta_from(j.at("growth_bytes"));
      p.budget = delta_from(j.at("budget_bytes"));
      p.tags_known = j.at("tags_known").get<bool>();
      for (const auto& m : j.at("tag_moves"))
        p.tag_moves.push_back(
            {m.at("tag").get<std::string>(),
             m.at("base_bytes").get<int64_t>(),
             m.at("head_bytes").get<int64_t>()});
      p.limit = text(j.at("limit"));
      p.over_limit = j.at("over_limit").get<bool>();
      c.phases.push_back(std::move(p));
    }
    c.tests_only_in_base = doc.at("tests_only_in_base").get<std::vector<std::string>>();
    c.tests_only_in_head = doc.at("tests_only_in_head").get<std::vector<std::string>>();
  } catch (const json::exception& e) {
    throw InputError(source + ": " + e.what());
  }
  return c;
}

}  // namespace oomguard::compare
