#pragma once
// Budgets as data: the peak allocated bytes each phase of each test may reach, kept in a JSON
// file beside the tests and changed by a reviewed diff, as snapshot tests are:
//
//   {"schema": "oomguard.budgets/1", "headroom": 0.1,
//    "budgets": {"CharLM.Memory": {"evaluate": {"cpu": "38MiB", "cuda": "40MiB",
//                                               "cuda:T4": "41MiB"}}}}
//
// A budget is looked up for the device and emulated card ("cuda:T4"), then the device
// ("cuda"). Accepting (OOMGUARD_ACCEPT=1 in the GoogleTest layer) writes the measured peak
// plus the headroom, under the card's key where the file has one, else the device's; a peak
// predicted for a card on CPU always goes under the card's key.
#include <cstdint>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace oomguard::memory {

// Where a measured phase ran: "cpu" or "cuda", and the emulated card ("" for none).
struct BudgetKey {
  std::string test;   // "Suite.Name"
  std::string phase;  // "evaluate"
  std::string device;
  std::string card;
  // Figures the allocator model predicted for the card (CPU): accepting writes them under the
  // card's own key ("cuda:t4") even where the file has only the device's.
  bool predicted = false;

  // The file's key of the device and card: "cuda:t4", or "cpu" without a card.
  std::string device_key() const;
};

struct BudgetFile {
  std::string path;
  double headroom = 0.10;  // what accepting adds to a measured peak
  // test -> phase -> device key ("cpu", "cuda", "cuda:T4") -> bytes
  std::map<std::string, std::map<std::string, std::map<std::string, int64_t>>> budgets;

  // The budget for `key`, if the file has one.
  std::optional<int64_t> find(const BudgetKey& key) const;
  // The device key ("cuda:T4" or "cuda") accepting writes `key` under.
  std::string accept_key(const BudgetKey& key) const;
};

// Reads `path`; a missing file is an empty one with the default headroom. Throws
// std::invalid_argument naming the file and the offending entry for anything malformed.
BudgetFile load_budgets(const std::string& path);

// The file's text: its schema, headroom and budgets (sizes as format_size prints them),
// two-space indented, with a final newline; what accepting writes.
std::string budgets_text(const BudgetFile& file);

// What accepting `peak_bytes` writes: the peak plus the headroom, rounded up to what
// format_size prints (so the file reads "41.2MiB" and means it).
int64_t accepted_budget(int64_t peak_bytes, double headroom);

// Records `peak_bytes` (plus headroom) for `key` in the file at `path`: read, changed and
// written back under an exclusive lock, so tests running side by side (ctest -j) do not lose
// each other's entries. Returns the budget written.
int64_t accept_budget(const std::string& path, const BudgetKey& key, int64_t peak_bytes);

// The phases `test` has a `device_key` budget for ("cpu", "cuda:t4") in `file` that are not
// among `measured` (phases it no longer measures, or renamed), in name order. Budgets of other
// devices and cards are not judged: a phase may be measured only there.
std::vector<std::string> stale_phases(
    const BudgetFile& file,
    const std::string& test,
    const std::vector<std::string>& measured,
    const std::string& device_key);

// Removes the `device_key` budget of `phases` of `test` from the file at `path` (under the
// same lock as accept_budget), a phase left without budgets and a test left without phases
// too. Returns how many budgets were removed.
int remove_budgets(
    const std::string& path,
    const std::string& test,
    const std::vector<std::string>& phases,
    const std::string& device_key);

// How a phase ended, and so how a run ended (its outcome: the worst of its phases), as
// reports and JUnit files spell it (to_string).
// kDeviceError: a CUDA error other than out-of-memory ended the phase (an illegal access, a
// cuBLAS or driver failure): the run stops there, its report says where.
// kUnsupported: on the Meta device, an operator without a Meta kernel, or whose output's shape
// depends on values, ended the phase: the run stops there, its report names the operator.
// kError: a run that left no report at all (a repeat's iteration whose process crashed).
enum class PhaseStatus {
  kPass,
  kBudgetExceeded,
  kNearOom,
  kOom,
  kInterrupted,
  kNotRun,
  kDeviceError,
  kError,
  kUnsupported
};
const char* to_string(PhaseStatus status);  // "pass", "budget_exceeded", "near_oom", ...
// The status to_string spells `text`; throws std::invalid_argument naming it otherwise.
PhaseStatus phase_status_from_string(const std::string& text);
// Writes to_string(status) (GoogleTest prints a status with it).
std::ostream& operator<<(std::ostream& out, PhaseStatus status);

// The worse of two statuses, in the one ranking every outcome follows:
// pass = not_run < near_oom < budget_exceeded < oom < device_error < unsupported <
// interrupted < error.
// An ending that stopped the run outranks a verdict on figures it measured; a run with no
// report at all is the worst, since nothing of it can be trusted.
PhaseStatus worst(PhaseStatus a, PhaseStatus b);
// The rank worst() compares: 0 for pass and not_run, higher for worse.
int severity(PhaseStatus status);

// The verdict on a phase that ended by itself: over its budget, else near an OOM (the
// allocator freed its cache and retried) when retries fail the phase, else pass. A budget of
// 0 or less is none.
PhaseStatus phase_verdict(
    int64_t peak_bytes, int64_t budget_bytes, int64_t num_alloc_retries, bool fail_on_retry);

// The size an out-of-memory message says was asked for ("Tried to allocate 20.00 MiB"), as
// the CPU meter and the CUDA caching allocator word it; -1 when it does not say.
int64_t requested_bytes_from_oom_message(const std::string& message);

// Why `peak_bytes` is over `budget_bytes` in words, or "" when it is within:
// "phase evaluate of CharLM.Memory peaked at 41.2MiB, over its budget 38MiB (started at 2MiB)".
std::string over_budget_message(
    const std::string& phase,
    const std::string& test,
    int64_t peak_bytes,
    int64_t budget_bytes,
    int64_t start_bytes);

}  // namespace oomguard::memory
