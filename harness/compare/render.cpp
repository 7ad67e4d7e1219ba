#include "harness/compare/render.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "harness/xml_text.h"
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

// How a name is written: as it is (console), or as Markdown code in a table cell or in text.
enum class Style { kPlain, kTableCode, kTextCode };

// `text` as Markdown code: backticks become quotes (a code span cannot hold its own fence);
// in a table cell a | must be escaped even there (GFM), outside one it must not.
std::string code(const std::string& text, Style style) {
  if (style == Style::kPlain)
    return text;
  std::string out = "`";
  for (char ch : text)
    out += ch == '`'                                 ? std::string("'")
           : ch == '|' && style == Style::kTableCode ? std::string("\\|")
           : ch == '\n'                              ? std::string(" ")
                                                     : std::string(1, ch);
  return out + "`";
}

// "mixer +64MiB, (untagged) +1MiB": the largest movers of what was live at the peak; with
// `sign` 1 (-1) only those that grew (shrank).
std::string movers(const PhaseChange& p, size_t most, Style style, int sign = 0) {
  if (!p.tags_known)
    return "";
  std::string out;
  size_t named = 0;
  for (const auto& m : p.tag_moves) {
    if (named == most)
      break;
    if (sign * m.delta() < 0)
      continue;
    out += (named++ ? ", " : "") + code(m.tag, style) + " " + signed_size(m.delta());
  }
  return out;
}

// What grew most in a phase that grew: " (TAG +SIZE)" for the verdict lines.
std::string lead_mover(const PhaseChange& p, Style style) {
  const std::string m = movers(p, 1, style, p.peak_allocated.bytes() >= 0 ? 1 : -1);
  return m.empty() ? "" : ": " + m;
}

// Left-aligned in `width` columns (longer text is kept whole).
std::string pad(const std::string& text, size_t width, bool right = false) {
  const std::string fill(text.size() < width ? width - text.size() : 0, ' ');
  return right ? fill + text : text + fill;
}

std::string verdict(const Comparison& c) {
  const auto over = c.over_limit();
  if (!over.empty())
    return std::to_string(over.size()) + (over.size() == 1 ? " phase" : " phases") +
           " over the limit";
  if (!c.changed())
    return "no change";
  const auto changed = c.largest_changes().size();
  std::string v = std::to_string(changed) + (changed == 1 ? " phase" : " phases") + " changed";
  for (const auto& [list, where] :
       {std::pair{&c.tests_only_in_base, " only in base"},
        std::pair{&c.tests_only_in_head, " only in head"}})
    if (!list->empty())
      v += ", " + std::to_string(list->size()) + (list->size() == 1 ? " test" : " tests") + where;
  return v + (c.limits.empty() ? "" : ", none over the limit");
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

// Plain text for Markdown: HTML's special characters escaped (as in XML), one line; in a
// table cell the | escaped too.
std::string text_md(const std::string& text, bool in_table = false) {
  std::string out;
  for (char ch : xml_escape(text)) {
    if (ch == '\n' || ch == '\r')
      out += ' ';
    else if (ch == '|' && in_table)
      out += "\\|";
    else
      out += ch;
  }
  return out;
}

std::string cell(const std::string& text) {
  return text_md(text, /*in_table=*/true);
}

std::string markdown_table(const std::vector<const PhaseChange*>& rows) {
  std::string t =
      "| | test | phase | peak allocated | Δ | Δ% | reserved | growth Δ | live at the peak: largest"
      " changes |\n"
      "|---|---|---|---:|---:|---:|---:|---:|---|\n";
  for (const PhaseChange* p : rows) {
    const std::string presence = presence_text(*p);
    const std::string mark = !p->over_limit     ? presence
                             : presence.empty() ? "**over " + p->limit + "**"
                                                : "**over " + p->limit + "**, " + presence;
    t += "| " + cell(mark) + " | " + code(p->test, Style::kTableCode) + " | " +
         code(p->phase_label(), Style::kTableCode) + " | " + cell(from_to(p->peak_allocated, "→")) +
         " | " + delta_text(p->peak_allocated) + " | " + percent_text(p->peak_allocated) + " | " +
         cell(from_to(p->peak_reserved, "→")) + " | " + delta_text(p->growth) + " | " +
         movers(*p, 3, Style::kTableCode) + " |\n";
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
                    kind_plural(c.base.kind) + ")\n";
  if (!c.conditions.empty())
    out += "measured under: " + facts_text(c.conditions) + "\n";
  for (const auto& n : c.notes)
    out += "differs: " + n + "\n";
  const auto rows = c.largest_changes();
  if (!rows.empty()) {
    // Columns as wide as their longest entry, so that nothing is cut.
    std::vector<std::vector<std::string>> table = {
        {"test", "phase", "peak allocated", "delta", "delta%", "reserved", "growth"}};
    for (const PhaseChange* p : rows)
      table.push_back(
          {p->test,
           p->phase_label(),
           from_to(p->peak_allocated, "->"),
           delta_text(p->peak_allocated),
           percent_text(p->peak_allocated),
           from_to(p->peak_reserved, "->"),
           delta_text(p->growth)});
    std::vector<size_t> width(table[0].size(), 0);
    for (const auto& row : table)
      for (size_t i = 0; i < row.size(); ++i)
        width[i] = std::max(width[i], row[i].size());
    for (size_t r = 0; r < table.size(); ++r) {
      for (size_t i = 0; i < table[r].size(); ++i)
        out += pad(table[r][i], width[i], /*right=*/i >= 2) + "  ";
      if (r == 0) {
        out += "live at the peak\n";
        continue;
      }
      const PhaseChange& p = *rows[r - 1];
      const std::string presence = presence_text(p);
      out += movers(p, 3, Style::kPlain) + (presence.empty() ? "" : "  [" + presence + "]") + "\n";
    }
  }
  for (const auto& t : c.tests_only_in_base)
    out += "only in base: " + t + "\n";
  for (const auto& t : c.tests_only_in_head)
    out += "only in head: " + t + "\n";
  for (const PhaseChange* p : c.over_limit())
    out += "over the limit " + p->limit + ": " + c.label(*p) + " " + delta_text(p->peak_allocated) +
           " (" + percent_text(p->peak_allocated) + ")" + lead_mover(*p, Style::kPlain) + "\n";
  return out + "outcome: " + verdict(c) + "\n";
}

std::string render_markdown(const Comparison& c, size_t shown) {
  std::string md = std::string(kMarkdownMarker) + "\n### oomguard: memory, base vs head\n\n";
  const auto over = c.over_limit();
  md += "**" + verdict(c) + "**";
  if (!c.limits.empty())
    md += " (limit " + text_md(limits_text(c)) + ", peak allocated)";
  for (const PhaseChange* p : over)
    md += "; " + code(c.label(*p), Style::kTextCode) + " " + delta_text(p->peak_allocated) +
          lead_mover(*p, Style::kTextCode);
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
    md += "\n- only in base: " + code(t, Style::kTextCode);
  for (const auto& t : c.tests_only_in_head)
    md += "\n- only in head: " + code(t, Style::kTextCode);
  if (!c.tests_only_in_base.empty() || !c.tests_only_in_head.empty())
    md += "\n";
  md += "\n<sub>" + std::string(kind_plural(c.base.kind)) + " " +
        code(c.base.path, Style::kTextCode) + " (base) and " + code(c.head.path, Style::kTextCode) +
        " (head)";
  if (!c.conditions.empty())
    md += "; measured under " + text_md(facts_text(c.conditions));
  for (const auto& n : c.notes)
    md += "; differs: " + text_md(n);
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
         {"occurrence", p.occurrence},
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
    InputKind kind;
    const auto key = side.at("kind").get<std::string>();
    if (!kind_from_key(key, kind))
      throw InputError(source + ": unknown kind " + key);
    return kind;
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
      p.occurrence = j.at("occurrence").get<int>();
      const auto presence = j.at("presence").get<std::string>();
      if (presence != "both" && presence != "base_only" && presence != "head_only")
        throw InputError(source + ": unknown presence " + presence);
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
