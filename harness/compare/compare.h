#pragma once
// Base vs head: the figures of two sides matched by test and phase, what was live at each
// peak matched by tag (never by address), and the limits a change is held to. No Torch.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "harness/compare/sides.h"

namespace oomguard::compare {

// A figure on both sides; kNoFigure where a side does not have it.
struct Delta {
  int64_t base = kNoFigure, head = kNoFigure;
  bool known() const { return base != kNoFigure && head != kNoFigure; }
  int64_t bytes() const { return known() ? head - base : 0; }
  // Δ as a percentage of |base|; +inf for growth from 0, 0 without a change.
  double percent() const;
};

// One tag's bytes live at the phase's peak on each side (0 where it was not listed).
struct TagMove {
  std::string tag;
  int64_t base_bytes = 0, head_bytes = 0;
  int64_t delta() const { return head_bytes - base_bytes; }
};

// A limit on a phase's growth in peak allocated bytes: `5%`, `64MiB`, `evaluate=2%`.
struct Limit {
  std::string phase;    // empty: every phase without a limit of its own
  double percent = -1;  // over base; -1: a byte limit
  int64_t bytes = -1;   // -1: a percentage
  std::string text;     // as given, for messages
};

// Parses `[PHASE=]N%` or `[PHASE=]SIZE`. Throws std::invalid_argument naming the text.
Limit parse_limit(std::string_view text);

enum class Presence { kBoth, kBaseOnly, kHeadOnly };

struct PhaseChange {
  std::string test, phase;
  int occurrence = 1;  // a phase name's n-th run within its test (measure("train") twice: 1, 2)
  Presence presence = Presence::kBoth;
  std::string base_status, head_status;  // the phase's, where the input says
  Delta peak_allocated, peak_reserved, growth, budget;
  bool tags_known = false;         // both sides listed what was live at the peak
  std::vector<TagMove> tag_moves;  // the tags that changed, largest |Δ| first
  std::string limit;               // the limit it was held to ("" none)
  bool over_limit = false;

  bool changed() const;
  // "train", or "train (2)" for its second run within the test.
  std::string phase_label() const;
};

struct SideFacts {
  std::string path;
  InputKind kind = InputKind::kRunReport;
};

struct Comparison {
  SideFacts base, head;
  Facts conditions;                 // what both sides were measured under (the first test's)
  std::vector<std::string> notes;   // differences that do not stop the comparison
  std::vector<PhaseChange> phases;  // every phase of every test both sides have, in base order
  std::vector<std::string> tests_only_in_base, tests_only_in_head;
  std::vector<Limit> limits;

  bool changed() const;  // any figure, tag, phase or test differs
  std::vector<const PhaseChange*> over_limit() const;
  // "Suite.Name evaluate", or "evaluate" where a side is one run (a run report, a trace, a
  // snapshot).
  std::string label(const PhaseChange& p) const;
  // Changed phases, the largest |Δ peak allocated| first (then reserved, then growth).
  std::vector<const PhaseChange*> largest_changes() const;
};

// Matches `head` against `base`, a phase by its name and how many times that name ran before
// it in the test. Throws InputError when they cannot be compared: different kinds, a test
// measured under different conditions (seed, card, allocator settings, ...), replays of other
// settings, or a limit naming a phase neither side has (or given twice).
Comparison compare(const Side& base, const Side& head, const std::vector<Limit>& limits);

}  // namespace oomguard::compare
