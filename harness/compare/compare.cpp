#include "harness/compare/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <stdexcept>

#include <oomguard/memory/sizes.h>

namespace oomguard::compare {
namespace {

const TestFigures* find_test(const Side& side, const std::string& name) {
  for (const auto& t : side.tests)
    if (t.name == name)
      return &t;
  return nullptr;
}

// The `occurrence`-th phase of that name (1-based).
const PhaseFigures* find_phase(const TestFigures& test, const std::string& name, int occurrence) {
  for (const auto& p : test.phases)
    if (p.name == name && --occurrence == 0)
      return &p;
  return nullptr;
}

// Per phase of `test`, the how-manieth of its name it is.
std::vector<int> occurrences(const TestFigures& test) {
  std::map<std::string, int> seen;
  std::vector<int> n;
  for (const auto& p : test.phases)
    n.push_back(++seen[p.name]);
  return n;
}

// Limits given twice for one phase (or twice without one), or naming a phase no side has.
void check_limits(const std::vector<Limit>& limits, const Side& base, const Side& head) {
  for (size_t i = 0; i < limits.size(); ++i) {
    for (size_t j = 0; j < i; ++j)
      if (limits[j].phase == limits[i].phase)
        throw InputError(
            "--fail-above " + limits[j].text + " and " + limits[i].text + ": two limits for " +
            (limits[i].phase.empty() ? std::string("every phase") : limits[i].phase));
    if (limits[i].phase.empty())
      continue;
    std::string names;
    bool found = false;
    for (const Side* side : {&base, &head})
      for (const auto& t : side->tests)
        for (const auto& p : t.phases) {
          found = found || p.name == limits[i].phase;
          if (names.find(" " + p.name + ",") == std::string::npos)
            names += " " + p.name + ",";
        }
    if (!found)
      throw InputError(
          "--fail-above " + limits[i].text + ": no phase " + limits[i].phase +
          " on either side (phases:" + names.substr(0, names.size() - 1) + ")");
  }
}

std::string value_of(const Facts& facts, const std::string& key) {
  for (const auto& [k, v] : facts)
    if (k == key)
      return v;
  return "(not given)";
}

// Stops when a test was measured under other conditions on the two sides.
void check_conditions(const TestFigures& base, const TestFigures& head, const Comparison& c) {
  for (const auto& [key, value] : base.conditions) {
    const std::string other = value_of(head.conditions, key);
    if (other != value)
      throw InputError(
          "base " + c.base.path + " and head " + c.head.path + " were measured differently (" +
          (base.name == "run" ? std::string() : "test " + base.name + ": ") + key + " " + value +
          " vs " + other + "): compare runs of the same seed, card and settings");
  }
}

void add_note(Comparison& c, const std::string& note) {
  if (std::find(c.notes.begin(), c.notes.end(), note) == c.notes.end())
    c.notes.push_back(note);
}

// What differs in what may differ: "LibTorch: 2.15.0 -> 2.16.0", "guards.no_grad_eval: true ->
// false" (said once however many tests share it).
void note_context(const TestFigures& base, const TestFigures& head, Comparison& c) {
  std::map<std::string, std::string> head_values(head.context.begin(), head.context.end());
  for (const auto& [key, value] : base.context) {
    const auto it = head_values.find(key);
    const std::string other = it == head_values.end() ? "(not given)" : it->second;
    if (other != value)
      add_note(c, key + ": " + value + " -> " + other);
    if (it != head_values.end())
      head_values.erase(it);
  }
  for (const auto& [key, value] : head_values)
    add_note(c, key + ": (not given) -> " + value);
}

Delta delta_of(int64_t base, int64_t head) {
  return Delta{base, head};
}

std::vector<TagMove> tag_moves(const PhaseFigures& base, const PhaseFigures& head) {
  std::map<std::string, TagMove> by_tag;
  for (const auto& t : base.live_at_peak)
    by_tag[t.tag] = {t.tag, t.bytes, 0};
  for (const auto& t : head.live_at_peak) {
    auto& m = by_tag[t.tag];
    m.tag = t.tag;
    m.head_bytes = t.bytes;
  }
  std::vector<TagMove> moves;
  for (const auto& [tag, m] : by_tag)
    if (m.delta() != 0)
      moves.push_back(m);
  // Named tags first: "(rest)" sums the tags past the five largest, so it moves whenever
  // one of them enters or leaves the five.
  const auto lumped = [](const TagMove& m) { return m.tag == "(rest)"; };
  std::stable_sort(moves.begin(), moves.end(), [&](const TagMove& a, const TagMove& b) {
    if (lumped(a) != lumped(b))
      return lumped(b);
    return std::llabs(a.delta()) > std::llabs(b.delta());
  });
  return moves;
}

const Limit* limit_for(const std::vector<Limit>& limits, const std::string& phase) {
  const Limit* general = nullptr;
  for (const auto& l : limits) {
    if (l.phase == phase)
      return &l;
    if (l.phase.empty())
      general = &l;
  }
  return general;
}

void hold_to_limit(PhaseChange& p, const std::vector<Limit>& limits) {
  const Limit* limit = limit_for(limits, p.phase);
  if (limit == nullptr || !p.peak_allocated.known())
    return;
  p.limit = limit->text;
  const int64_t grew = p.peak_allocated.bytes();
  p.over_limit = grew > 0 && (limit->bytes >= 0 ? grew > limit->bytes
                                                : p.peak_allocated.percent() > limit->percent);
}

// A phase on one side only: its figures on that side, -1 on the other.
PhaseChange one_sided(
    const std::string& test, const PhaseFigures& p, int occurrence, Presence presence) {
  PhaseChange c;
  c.test = test;
  c.phase = p.name;
  c.occurrence = occurrence;
  c.presence = presence;
  const bool base = presence == Presence::kBaseOnly;
  const auto side = [base](int64_t v) { return base ? Delta{v, kNoFigure} : Delta{kNoFigure, v}; };
  c.peak_allocated = side(p.peak_allocated_bytes);
  c.peak_reserved = side(p.peak_reserved_bytes);
  c.growth = side(p.growth_bytes);
  c.budget = side(p.budget_bytes);
  (base ? c.base_status : c.head_status) = p.status;
  return c;
}

int64_t size_of_change(const Delta& d) {
  if (d.known())
    return std::llabs(d.bytes());
  return d.base != kNoFigure   ? std::llabs(d.base)  // a phase on one side: all of it
         : d.head != kNoFigure ? std::llabs(d.head)
                               : 0;
}

}  // namespace

double Delta::percent() const {
  if (!known() || head == base)
    return 0.0;
  if (base == 0)
    return std::numeric_limits<double>::infinity();
  return 100.0 * static_cast<double>(head - base) / std::abs(static_cast<double>(base));
}

std::string PhaseChange::phase_label() const {
  return occurrence == 1 ? phase : phase + " (" + std::to_string(occurrence) + ")";
}

bool PhaseChange::changed() const {
  if (presence != Presence::kBoth)
    return true;
  return peak_allocated.bytes() != 0 || peak_reserved.bytes() != 0 || growth.bytes() != 0 ||
         budget.bytes() != 0 || !tag_moves.empty() || base_status != head_status;
}

Limit parse_limit(std::string_view text) {
  Limit limit;
  limit.text = std::string(text);
  const size_t eq = text.find('=');
  if (eq != std::string_view::npos) {
    limit.phase = std::string(text.substr(0, eq));
    text.remove_prefix(eq + 1);
    if (limit.phase.empty())
      throw std::invalid_argument("--fail-above " + limit.text + ": no phase before '='");
  }
  if (!text.empty() && text.back() == '%') {
    const std::string number(text.substr(0, text.size() - 1));
    char* end = nullptr;
    limit.percent = std::strtod(number.c_str(), &end);
    if (number.empty() || end != number.c_str() + number.size() || !(limit.percent >= 0) ||
        std::isinf(limit.percent))
      throw std::invalid_argument(
          "--fail-above " + limit.text + ": not a percentage (e.g. 5% or evaluate=2.5%)");
    return limit;
  }
  try {
    limit.bytes = memory::parse_size(text);
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument(
        "--fail-above " + limit.text +
        ": neither a percentage nor a size (e.g. 5%, 64MiB, "
        "evaluate=2%)");
  }
  if (limit.bytes < 0)
    throw std::invalid_argument("--fail-above " + limit.text + ": a negative size");
  return limit;
}

bool Comparison::changed() const {
  if (!tests_only_in_base.empty() || !tests_only_in_head.empty())
    return true;
  return std::any_of(
      phases.begin(), phases.end(), [](const PhaseChange& p) { return p.changed(); });
}

std::vector<const PhaseChange*> Comparison::over_limit() const {
  std::vector<const PhaseChange*> over;
  for (const auto& p : phases)
    if (p.over_limit)
      over.push_back(&p);
  return over;
}

std::string Comparison::label(const PhaseChange& p) const {
  const bool one_run = base.kind == InputKind::kRunReport || base.kind == InputKind::kTrace ||
                       base.kind == InputKind::kSnapshot;
  return one_run ? p.phase_label() : p.test + " " + p.phase_label();
}

std::vector<const PhaseChange*> Comparison::largest_changes() const {
  std::vector<const PhaseChange*> changed;
  for (const auto& p : phases)
    if (p.changed())
      changed.push_back(&p);
  std::stable_sort(changed.begin(), changed.end(), [](const PhaseChange* a, const PhaseChange* b) {
    for (const auto member :
         {&PhaseChange::peak_allocated, &PhaseChange::peak_reserved, &PhaseChange::growth}) {
      const int64_t x = size_of_change(a->*member), y = size_of_change(b->*member);
      if (x != y)
        return x > y;
    }
    return false;
  });
  return changed;
}

Comparison compare(const Side& base, const Side& head, const std::vector<Limit>& limits) {
  Comparison c;
  c.base = {base.path, base.kind};
  c.head = {head.path, head.kind};
  c.limits = limits;
  if (base.kind != head.kind)
    throw InputError(
        "base " + base.path + " is a " + kind_words(base.kind) + ", head " + head.path + " a " +
        kind_words(head.kind) + ": compare two of the same kind");
  check_limits(limits, base, head);
  for (const auto& bt : base.tests) {
    const TestFigures* ht = find_test(head, bt.name);
    if (ht == nullptr) {
      c.tests_only_in_base.push_back(bt.name);
      continue;
    }
    check_conditions(bt, *ht, c);
    if (c.conditions.empty())
      c.conditions = bt.conditions;
    note_context(bt, *ht, c);
    const std::vector<int> base_n = occurrences(bt), head_n = occurrences(*ht);
    for (size_t i = 0; i < bt.phases.size(); ++i) {
      const PhaseFigures& bp = bt.phases[i];
      const PhaseFigures* hp = find_phase(*ht, bp.name, base_n[i]);
      if (hp == nullptr) {
        c.phases.push_back(one_sided(bt.name, bp, base_n[i], Presence::kBaseOnly));
        continue;
      }
      PhaseChange p;
      p.test = bt.name;
      p.phase = bp.name;
      p.occurrence = base_n[i];
      p.base_status = bp.status;
      p.head_status = hp->status;
      p.peak_allocated = delta_of(bp.peak_allocated_bytes, hp->peak_allocated_bytes);
      p.peak_reserved = delta_of(bp.peak_reserved_bytes, hp->peak_reserved_bytes);
      p.growth = delta_of(bp.growth_bytes, hp->growth_bytes);
      p.budget = delta_of(bp.budget_bytes, hp->budget_bytes);
      p.tags_known = bp.tags_known && hp->tags_known;
      if (p.tags_known)
        p.tag_moves = tag_moves(bp, *hp);
      hold_to_limit(p, limits);
      c.phases.push_back(std::move(p));
    }
    for (size_t i = 0; i < ht->phases.size(); ++i)
      if (find_phase(bt, ht->phases[i].name, head_n[i]) == nullptr)
        c.phases.push_back(one_sided(bt.name, ht->phases[i], head_n[i], Presence::kHeadOnly));
  }
  for (const auto& ht : head.tests)
    if (find_test(base, ht.name) == nullptr)
      c.tests_only_in_head.push_back(ht.name);
  if (base.kind == InputKind::kReplayReport &&
      (!c.tests_only_in_base.empty() || !c.tests_only_in_head.empty()))
    throw InputError(
        "base " + base.path + " and head " + head.path + " replayed other settings (" +
        (c.tests_only_in_base.empty() ? "" : "base: " + c.tests_only_in_base.front() + "; ") +
        (c.tests_only_in_head.empty() ? "" : "head: " + c.tests_only_in_head.front()) +
        "): replay both with the same --card, --capacity and --alloc-conf");
  return c;
}

}  // namespace oomguard::compare
