#include <oomguard/memory/budgets.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <regex>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include <oomguard/memory/sizes.h>
#include "harness/atomic_file.h"

namespace oomguard::memory {
namespace {

constexpr const char* kSchema = "oomguard.budgets/1";

[[noreturn]] void bad_file(const std::string& path, const std::string& what) {
  throw std::invalid_argument(path + ": " + what);
}

std::string device_key(const std::string& device, const std::string& card) {
  return card.empty() ? device : device + ":" + card;
}

BudgetFile parse_budgets(const std::string& path, const std::string& text) {
  BudgetFile file;
  file.path = path;
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    bad_file(path, std::string("not JSON: ") + e.what());
  }
  if (!doc.is_object())
    bad_file(path, "expected an object with \"schema\", \"headroom\" and \"budgets\"");
  if (doc.value("schema", "") != kSchema)
    bad_file(path, std::string("\"schema\" must be \"") + kSchema + "\"");
  if (doc.contains("headroom")) {
    if (!doc["headroom"].is_number() || doc["headroom"].get<double>() < 0 ||
        doc["headroom"].get<double>() > 10)
      bad_file(path, "\"headroom\" must be a number from 0 to 10 (0.1 adds 10%)");
    file.headroom = doc["headroom"].get<double>();
  }
  const nlohmann::json& budgets = doc.value("budgets", nlohmann::json::object());
  if (!budgets.is_object())
    bad_file(path, "\"budgets\" must be an object keyed by test");
  for (const auto& [test, phases] : budgets.items()) {
    if (!phases.is_object())
      bad_file(path, "budgets." + test + " must be an object keyed by phase");
    for (const auto& [phase, devices] : phases.items()) {
      if (!devices.is_object())
        bad_file(path, "budgets." + test + "." + phase + " must be an object keyed by device");
      for (const auto& [device, size] : devices.items()) {
        const std::string where = "budgets." + test + "." + phase + "." + device;
        if (device.rfind("cpu", 0) != 0 && device.rfind("cuda", 0) != 0 &&
            device.rfind("meta", 0) != 0)
          bad_file(path, where + ": the key must be cpu, cuda or meta, optionally with :CARD");
        if (!size.is_string())
          bad_file(path, where + " must be a size such as \"38MiB\"");
        try {
          file.budgets[test][phase][device] = parse_size(size.get<std::string>());
        } catch (const std::invalid_argument& e) {
          bad_file(path, where + ": " + e.what());
        }
      }
    }
  }
  return file;
}

// An exclusive lock on the folder holding `path` for the life of the object: the file itself
// is replaced by a rename, and a lock file would be left beside the user's budgets.
class FolderLock {
 public:
  explicit FolderLock(const std::string& path) {
    std::string folder = std::filesystem::path(path).parent_path().string();
    if (folder.empty())
      folder = ".";
    fd_ = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY);
    if (fd_ >= 0 && ::flock(fd_, LOCK_EX) == 0)
      return;
    const std::string why = std::strerror(errno);
    if (fd_ >= 0)
      ::close(fd_);
    throw std::runtime_error(path + ": its folder cannot be locked for writing (" + why + ")");
  }
  ~FolderLock() {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace

std::string budgets_text(const BudgetFile& file) {
  nlohmann::ordered_json doc;
  doc["schema"] = kSchema;
  doc["headroom"] = file.headroom;
  nlohmann::ordered_json budgets = nlohmann::ordered_json::object();
  for (const auto& [test, phases] : file.budgets)
    for (const auto& [phase, devices] : phases)
      for (const auto& [device, bytes] : devices)
        budgets[test][phase][device] = format_size(bytes);
  doc["budgets"] = budgets;
  return doc.dump(2) + "\n";
}

std::string BudgetKey::device_key() const {
  return memory::device_key(device, card);
}

std::optional<int64_t> BudgetFile::find(const BudgetKey& key) const {
  const auto test = budgets.find(key.test);
  if (test == budgets.end())
    return std::nullopt;
  const auto phase = test->second.find(key.phase);
  if (phase == test->second.end())
    return std::nullopt;
  for (const std::string& device : {device_key(key.device, key.card), key.device}) {
    const auto found = phase->second.find(device);
    if (found != phase->second.end())
      return found->second;
  }
  return std::nullopt;
}

std::string BudgetFile::accept_key(const BudgetKey& key) const {
  const std::string with_card = device_key(key.device, key.card);
  if (key.predicted)
    return with_card;
  const auto test = budgets.find(key.test);
  if (test != budgets.end()) {
    const auto phase = test->second.find(key.phase);
    if (phase != test->second.end() && phase->second.count(with_card) > 0)
      return with_card;
  }
  return key.device;
}

BudgetFile load_budgets(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    BudgetFile empty;
    empty.path = path;
    return empty;
  }
  std::stringstream text;
  text << in.rdbuf();
  return parse_budgets(path, text.str());
}

int64_t accepted_budget(int64_t peak_bytes, double headroom) {
  int64_t budget =
      static_cast<int64_t>(std::ceil(static_cast<double>(peak_bytes) * (1.0 + headroom)));
  // format_size prints two decimals of its unit: step up by a hundredth of that unit until
  // the printed figure is at least the budget.
  for (int i = 0; i < 4 && parse_size(format_size(budget)) < budget; ++i) {
    const int64_t printed = parse_size(format_size(budget));
    int64_t unit = 1;
    while (unit * 1024 <= budget && unit < (int64_t{1} << 40))
      unit *= 1024;
    budget = printed + std::max<int64_t>(unit / 100, 1);
  }
  return parse_size(format_size(budget));
}

int64_t accept_budget(const std::string& path, const BudgetKey& key, int64_t peak_bytes) {
  FolderLock lock(path);
  BudgetFile file = load_budgets(path);
  const int64_t budget = accepted_budget(peak_bytes, file.headroom);
  file.budgets[key.test][key.phase][file.accept_key(key)] = budget;
  write_file_atomically(path, budgets_text(file));
  return budget;
}

std::vector<std::string> stale_phases(
    const BudgetFile& file,
    const std::string& test,
    const std::vector<std::string>& measured,
    const std::string& device_key) {
  std::vector<std::string> stale;
  const auto entry = file.budgets.find(test);
  if (entry == file.budgets.end())
    return stale;
  for (const auto& [phase, keys] : entry->second)
    if (keys.count(device_key) != 0 &&
        std::find(measured.begin(), measured.end(), phase) == measured.end())
      stale.push_back(phase);
  return stale;
}

int remove_budgets(
    const std::string& path,
    const std::string& test,
    const std::vector<std::string>& phases,
    const std::string& device_key) {
  FolderLock lock(path);
  BudgetFile file = load_budgets(path);
  const auto entry = file.budgets.find(test);
  if (entry == file.budgets.end())
    return 0;
  int removed = 0;
  for (const auto& phase : phases) {
    const auto keys = entry->second.find(phase);
    if (keys == entry->second.end())
      continue;
    removed += static_cast<int>(keys->second.erase(device_key));
    if (keys->second.empty())
      entry->second.erase(keys);
  }
  if (entry->second.empty())
    file.budgets.erase(entry);
  if (removed > 0)
    write_file_atomically(path, budgets_text(file));
  return removed;
}

const char* to_string(PhaseStatus status) {
  switch (status) {
    case PhaseStatus::kPass:
      return "pass";
    case PhaseStatus::kBudgetExceeded:
      return "budget_exceeded";
    case PhaseStatus::kNearOom:
      return "near_oom";
    case PhaseStatus::kOom:
      return "oom";
    case PhaseStatus::kInterrupted:
      return "interrupted";
    case PhaseStatus::kNotRun:
      return "not_run";
    case PhaseStatus::kDeviceError:
      return "device_error";
    case PhaseStatus::kError:
      return "error";
    case PhaseStatus::kUnsupported:
      return "unsupported";
  }
  return "not_run";
}

PhaseStatus phase_status_from_string(const std::string& text) {
  for (PhaseStatus s :
       {PhaseStatus::kPass,
        PhaseStatus::kBudgetExceeded,
        PhaseStatus::kNearOom,
        PhaseStatus::kOom,
        PhaseStatus::kInterrupted,
        PhaseStatus::kNotRun,
        PhaseStatus::kDeviceError,
        PhaseStatus::kError,
        PhaseStatus::kUnsupported}) {
    if (text == to_string(s))
      return s;
  }
  throw std::invalid_argument("\"" + text + "\" is not a phase status or outcome");
}

int severity(PhaseStatus status) {
  switch (status) {
    case PhaseStatus::kPass:
    case PhaseStatus::kNotRun:
      return 0;
    case PhaseStatus::kNearOom:
      return 1;
    case PhaseStatus::kBudgetExceeded:
      return 2;
    case PhaseStatus::kOom:
      return 3;
    case PhaseStatus::kDeviceError:
      return 4;
    case PhaseStatus::kUnsupported:
      return 5;
    case PhaseStatus::kInterrupted:
      return 6;
    case PhaseStatus::kError:
      return 7;
  }
  return 7;
}

PhaseStatus worst(PhaseStatus a, PhaseStatus b) {
  return severity(b) > severity(a) ? b : a;
}

std::ostream& operator<<(std::ostream& out, PhaseStatus status) {
  return out << to_string(status);
}

PhaseStatus phase_verdict(
    int64_t peak_bytes, int64_t budget_bytes, int64_t num_alloc_retries, bool fail_on_retry) {
  if (budget_bytes > 0 && peak_bytes > budget_bytes)
    return PhaseStatus::kBudgetExceeded;
  if (num_alloc_retries > 0 && fail_on_retry)
    return PhaseStatus::kNearOom;
  return PhaseStatus::kPass;
}

int64_t requested_bytes_from_oom_message(const std::string& message) {
  static const std::regex kTried(R"(Tried to allocate ([0-9.]+) (B|KiB|MiB|GiB))");
  std::smatch m;
  if (!std::regex_search(message, m, kTried))
    return -1;
  double scale = 1.0;
  for (const char* unit : {"KiB", "MiB", "GiB"}) {
    scale *= 1024.0;
    if (m[2] == unit)
      return static_cast<int64_t>(std::stod(m[1]) * scale);
  }
  return static_cast<int64_t>(std::stod(m[1]));
}

std::string over_budget_message(
    const std::string& phase,
    const std::string& test,
    int64_t peak_bytes,
    int64_t budget_bytes,
    int64_t start_bytes) {
  if (peak_bytes <= budget_bytes)
    return "";
  return "phase " + phase + " of " + test + " peaked at " + format_size(peak_bytes) +
         ", over its budget " + format_size(budget_bytes) + " (started at " +
         format_size(start_bytes) + ")";
}

}  // namespace oomguard::memory
