#pragma once
// One side of a comparison (`oomguard compare BASE HEAD`): whatever the user gave, read into
// the same shape: tests, each with phases, each with its peaks and what was live at the peak.
// No Torch.
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "harness/usage_error.h"
#include <oomguard/memory/tag_bytes.h>

namespace oomguard::compare {

// What a side is. Two sides of a comparison must be of the same kind.
enum class InputKind {
  kRunReport,      // oomguard run --report (oomguard.report/1 without `test`)
  kTestReports,    // a folder of GoogleTest layer reports (OOMGUARD_REPORT_DIR)
  kRepeatSummary,  // oomguard repeat / merge --report (oomguard.repeat/1)
  kReplayReport,   // oomguard replay --report (oomguard.replay/1)
  kTrace,          // oomguard run --trace (JSON Lines)
  kSnapshot,       // a PyTorch memory snapshot pickle
};

// "run report", "folder of test reports", ...: for messages.
const char* kind_words(InputKind kind);
// "run reports", "folders of test reports", ...
const char* kind_plural(InputKind kind);
// "run_report", "test_reports", ...: for the JSON report.
const char* kind_key(InputKind kind);
// The kind whose kind_key is `key`; false for none.
bool kind_from_key(const std::string& key, InputKind& kind);

// An input that cannot be compared: what() is one line naming the file and what is wrong.
// A usage error: the CLI exits 2 with it.
using InputError = UsageError;

using TagBytes = memory::TagBytes;

// A figure the input does not carry (growth can be negative, so not -1).
constexpr int64_t kNoFigure = std::numeric_limits<int64_t>::min();

// One phase of one test on one side.
struct PhaseFigures {
  std::string name;
  int64_t peak_allocated_bytes = 0;
  int64_t peak_reserved_bytes = kNoFigure;  // measured on CUDA, or the allocator model's
  int64_t growth_bytes = kNoFigure;         // end minus start: what the phase left behind
  int64_t budget_bytes = kNoFigure;
  std::string status;                  // pass, budget_exceeded, oom, ...; "" where not given
  bool tags_known = false;             // false on CUDA, in summaries and replay reports
  std::vector<TagBytes> live_at_peak;  // the largest tags, then "(rest)", as the input lists them
};

// A named pair of strings: ("seed", "0"), ("card", "t4").
using Facts = std::vector<std::pair<std::string, std::string>>;

struct TestFigures {
  std::string name;  // Suite.Name; "run" for a run report; a replay's setting
  Facts conditions;  // what the figures depend on: both sides must agree (seed, card, ...)
  Facts context;     // what may differ and is said (LibTorch version, guards, config)
  std::vector<PhaseFigures> phases;
};

struct Side {
  std::string path;
  InputKind kind = InputKind::kRunReport;
  std::vector<TestFigures> tests;  // in the input's order (a folder: by name)
};

// Reads `path`: a folder of test reports, a JSON report of one of the kinds above, a trace or
// a snapshot (told by their content, not their names). A folder takes `<Suite.Name>.json`
// files whose `test.name` is that name; other files there are skipped. Traces and snapshots
// are replayed through the caching-allocator model with their default (a snapshot: its
// recorded) settings for the reserved figure. Throws InputError.
Side read_side(const std::string& path);

}  // namespace oomguard::compare
