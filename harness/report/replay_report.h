#pragma once
// oomguard.replay/1, typed: what `oomguard replay --report` writes (one writer, to_json) and
// what compare and plot read (one reader, replay_record_from_json).
// harness/schemas/replay.schema.json describes the JSON. No Torch.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <oomguard/memory/tag_bytes.h>

namespace oomguard::report {

constexpr const char* kReplayReportSchema = "oomguard.replay/1";

// One replay: the card or capacity and allocator settings it ran with, and its figures.
struct ReplayFigures {
  std::string card;  // a card profile's name; "" for a capacity (null)
  int64_t capacity_bytes = 0;
  std::string alloc_conf;     // "" for the default settings
  std::string torch_version;  // the modelled allocator's, "2.15"
  int64_t events = 0;
  int64_t peak_requested_bytes = 0;
  int64_t peak_allocated_bytes = 0;
  int64_t peak_reserved_bytes = 0;
  int64_t largest_gap_bytes = 0;
  int64_t largest_gap_line = 0;
  int64_t num_alloc_retries = 0;
  int64_t num_ooms = 0;
  int64_t cublas_workspace_bytes = 0;
  std::string cublas_workspace;  // "2 handles x 8,519,680 B ..."; "" for none (null)
  // Where the model ran out (line, id, bytes, phase, step, tag, alloc_bytes,
  // largest_free_block_bytes, message); null when it fits.
  nlohmann::json oom = nullptr;

  bool fits() const { return oom.is_null(); }
};

// One phase of the first replay.
struct ReplayPhase {
  std::string name;
  int64_t peak_requested_bytes = 0;
  int64_t peak_allocated_bytes = 0;
  int64_t peak_reserved_bytes = 0;
  int64_t largest_gap_bytes = 0;
  int64_t num_alloc_retries = 0;
  std::vector<memory::TagBytes> live_at_peak;
};

struct ReplayRecord {
  std::string trace;                    // the trace or snapshot replayed
  std::vector<ReplayFigures> settings;  // every replay; the first is the report's top level
  std::vector<ReplayPhase> phases;      // of the first replay
  nlohmann::json snapshot = nullptr;    // a snapshot's device and recording match; null: a trace
};

nlohmann::json to_json(const ReplayRecord& record);

// Reads what to_json wrote. Throws UsageError naming `source`, where and what is wrong.
ReplayRecord replay_record_from_json(const nlohmann::json& doc, const std::string& source);

}  // namespace oomguard::report
