#pragma once
// oomguard.report/1, typed: what `oomguard run --report` and the GoogleTest layer write (one
// writer, to_json) and what repeat, plot and compare read (one reader, run_record_from_json).
// harness/schemas/report.schema.json describes the JSON. No Torch.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <oomguard/memory/budgets.h>
#include <oomguard/memory/device_kind.h>
#include <oomguard/memory/tag_bytes.h>
#include <oomguard/sim/gpu_rules.h>

namespace oomguard::report {

constexpr const char* kRunReportSchema = "oomguard.report/1";

struct PhaseRecord {
  std::string name;
  memory::PhaseStatus status = memory::PhaseStatus::kNotRun;
  int64_t start_allocated_bytes = 0;
  int64_t peak_allocated_bytes = 0;
  int64_t end_allocated_bytes = 0;
  int64_t budget_bytes = 0;
  int64_t peak_reserved_bytes = -1;             // -1: none (null; a CPU run without the model)
  int64_t predicted_peak_allocated_bytes = -1;  // -1: none (null; no allocator model)
  int64_t num_alloc_retries = 0;
  int64_t steps = 0;
  double wall_seconds = 0.0;
  // What was live at the peak by tag (the five largest, then "(rest)"); none (null) where the
  // meter sees no tags (CUDA).
  std::optional<std::vector<memory::TagBytes>> live_at_peak;
  // The phase's own fields, written beside these: a run's loss and tokens, a test's budget key,
  // predictions and per-step bytes. Read back as they were.
  nlohmann::json extra = nlohmann::json::object();
};

// Where the run ran and what it emulated: the report names both cards. Empty strings and -1
// are written as null.
struct DeviceInfo {
  memory::DeviceKind type = memory::DeviceKind::kCpu;
  std::string name;               // the GPU's name on CUDA
  int64_t total_bytes = -1;       // the GPU's total memory on CUDA
  std::string card;               // the emulated card profile (--card)
  std::string alloc_conf;         // the caching allocator's settings in effect
  std::string alloc_conf_source;  // config, environment or default
  std::string allocator_model;    // cuda: a CPU run through the caching-allocator model
  std::string model_workspace;    // with the model: the cuBLAS workspaces it adds
  std::string model_rules;        // with the model: its CPU-to-GPU rules ("cublas_workspace,...")
  // CUDA: the allocator's segments at the phase end where it held the most, of which
  // expandable, and what that says of expandable_segments (sim::expandable_segments_effect).
  int64_t segments = -1;
  int64_t expandable_segments = -1;
  std::string alloc_conf_effect;
};

struct OomRecord {
  std::string phase;             // "setup" outside every phase
  int64_t requested_bytes = -1;  // -1: not known from the message
  std::string message;
  nlohmann::json extra = nlohmann::json::object();  // a test's: whether it was predicted
};

// A CUDA error other than out-of-memory that ended the run.
struct DeviceErrorRecord {
  std::string phase;
  std::string message;
};

// On the Meta device: the operator that could not run on shapes alone ended the run.
struct UnsupportedRecord {
  std::string phase;
  std::string op;  // "aten::nonzero"
  std::string message;
};

struct RunRecord {
  std::string test_name;    // a test's report: "Suite.Name"; "" for a run's
  std::string test_source;  // a test's report: what wrote it ("oomguard::gtest")
  memory::PhaseStatus outcome = memory::PhaseStatus::kPass;  // the worst of its phases
  // The run's seed; none (null) for a worst case whose inputs no seed chose (a data file's).
  std::optional<uint64_t> seed = 0;
  DeviceInfo device;
  std::string torch_version;  // "2.15.0"
  int64_t capacity_bytes = 0;
  nlohmann::json guards = nlohmann::json::object();  // guard name -> on (a run's)
  nlohmann::json config = nlohmann::json::object();  // the resolved config (a run's)
  std::vector<PhaseRecord> phases;
  std::vector<sim::RuleEffect> budget_rules;  // added to the config's budgets for this device
  std::optional<DeviceErrorRecord> device_error;
  std::optional<UnsupportedRecord> unsupported;  // written only where there is one
  std::optional<OomRecord> oom;
  // `oomguard run --worst-case`: the inputs each phase's figures come from and how far they
  // bind (app::worst_case_json); null otherwise. Read back as it was.
  nlohmann::json worst_case = nullptr;
};

nlohmann::json to_json(const RunRecord& record);
// Writes to_json atomically (a temporary file beside `path`, then a rename).
void write_run_record(const RunRecord& record, const std::string& path);

// Reads what to_json wrote. Throws UsageError naming `source`, where and what is wrong: not a
// report (no or another schema), a missing field, a field of the wrong type.
RunRecord run_record_from_json(const nlohmann::json& doc, const std::string& source);

}  // namespace oomguard::report
