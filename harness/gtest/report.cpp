#include <cstdlib>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <system_error>
#include <mutex>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "harness/memory/built_torch.h"
#include "harness/atomic_file.h"
#include "harness/gtest/registry.h"
#include "harness/report/run_report.h"

namespace oomguard::testing::detail {
namespace {

struct TestRecord {
  uint64_t seed = 0;
  bool seed_drawn = false;
  std::vector<PhaseEntry> phases;
};

std::mutex g_mutex;
std::map<std::string, TestRecord> g_tests;  // by "Suite.Name"

// A measure_steps() phase's prediction over orders of its steps.
nlohmann::json orders_json(const StepOrders& o) {
  const auto or_null = [](const std::string& text) {
    return text.empty() ? nlohmann::json() : nlohmann::json(text);
  };
  if (!o.searched())
    return {{"searched", false}, {"why_not", o.why_not}};
  return {
      {"searched", true},
      {"orders_tried", o.orders_tried},
      {"recorded_reserved_bytes", o.recorded_reserved_bytes},
      {"lowest_reserved_bytes", o.lowest_reserved_bytes},
      {"highest_reserved_bytes", o.highest_reserved_bytes},
      {"highest_order", o.highest_order},
      {"highest_oom", or_null(o.highest_oom)}};
}

report::PhaseRecord phase_record(const PhaseEntry& entry) {
  const PhaseResult& r = entry.result;
  report::PhaseRecord p;
  p.name = r.name;
  p.status = entry.status;
  p.start_allocated_bytes = r.start_allocated_bytes;
  p.peak_allocated_bytes = r.peak_allocated_bytes;
  p.end_allocated_bytes = r.end_allocated_bytes;
  p.budget_bytes = entry.budget_bytes;
  // With a prediction, the reserved and retry figures are its first target's, as in a report
  // of `oomguard run --allocator-model cuda`.
  const Prediction* first = r.predictions.empty() ? nullptr : &r.predictions.front();
  p.peak_reserved_bytes = first != nullptr ? first->peak_reserved_bytes : r.peak_reserved_bytes;
  p.predicted_peak_allocated_bytes = first != nullptr ? first->peak_allocated_bytes : -1;
  p.num_alloc_retries = first != nullptr ? first->num_alloc_retries : r.num_alloc_retries;
  p.steps = static_cast<int64_t>(r.step_end_bytes.size());
  p.wall_seconds = r.wall_seconds;
  if (r.meter != "cuda") {  // the CPU's and the Meta device's tracking allocators see tags
    p.live_at_peak.emplace();
    for (const auto& [tag, bytes] : r.live_at_peak)
      if (bytes > 0)
        p.live_at_peak->push_back({tag, bytes});
  }
  p.extra = {
      {"budget_key",
       entry.budget_key.empty() ? nlohmann::json() : nlohmann::json(entry.budget_key)},
      {"budget_checked_against",
       entry.budget_key.empty()
           ? nlohmann::json()
           : nlohmann::json(entry.budget_predicted ? "predicted" : "measured")},
      {"untracked", r.untracked.empty() ? nlohmann::json() : nlohmann::json(r.untracked)}};
  if (first != nullptr) {
    nlohmann::json predictions = nlohmann::json::array();
    for (const Prediction& pr : r.predictions) {
      nlohmann::json rules = nlohmann::json::array();
      for (const sim::RuleEffect& rule : pr.rules)
        rules.push_back({{"name", rule.name}, {"bytes", rule.bytes}, {"detail", rule.detail}});
      predictions.push_back(
          {{"label", pr.label},
           {"card", pr.card.empty() ? nlohmann::json() : nlohmann::json(pr.card)},
           {"capacity_bytes", pr.capacity_bytes},
           {"alloc_conf", pr.alloc_conf},
           {"fits", pr.fits()},
           {"peak_allocated_bytes", pr.peak_allocated_bytes},
           {"peak_reserved_bytes", pr.peak_reserved_bytes},
           {"num_alloc_retries", pr.num_alloc_retries},
           {"largest_gap_bytes", pr.largest_gap_bytes},
           {"oom", pr.oom.empty() ? nlohmann::json() : nlohmann::json(pr.oom)},
           {"rules", rules}});
      if (!r.step_end_bytes.empty())
        predictions.back()["orders"] = orders_json(pr.orders);
    }
    p.extra["predictions"] = predictions;
  }
  if (!r.step_end_bytes.empty())
    p.extra["step_end_bytes"] = r.step_end_bytes;
  return p;
}

// The test's report: oomguard.report/1 as `oomguard run` writes it (report::to_json), with the
// test's name in "test" and no TinyGPT guards or config.
void write_report(const std::string& test, const TestRecord& record) {
  const char* dir = std::getenv("OOMGUARD_REPORT_DIR");
  if (dir == nullptr || *dir == '\0' || record.phases.empty())
    return;
  const PhaseResult& first = record.phases.front().result;
  const Prediction* predicted = first.predictions.empty() ? nullptr : &first.predictions.front();
  report::RunRecord doc;
  doc.test_name = test;
  doc.test_source = "oomguard::gtest";
  doc.seed = record.seed;
  doc.device.type = memory::device_kind_from_string(first.meter);
  doc.device.card = first.card;
  if (predicted != nullptr) {
    doc.device.allocator_model = "cuda";
    if (!predicted->alloc_conf.empty()) {
      doc.device.alloc_conf = predicted->alloc_conf;
      doc.device.alloc_conf_source = "environment";
    }
  }
  doc.torch_version = memory::built_torch_version_text();
  doc.capacity_bytes = first.capacity_bytes;
  for (const PhaseEntry& entry : record.phases) {
    doc.phases.push_back(phase_record(entry));
    doc.outcome = memory::worst(doc.outcome, entry.status);
    if (entry.status == memory::PhaseStatus::kOom && !doc.oom)
      doc.oom = report::OomRecord{
          entry.result.name,
          memory::requested_bytes_from_oom_message(entry.result.oom),
          entry.result.oom,
          {{"predicted", !entry.result.predictions.empty()}}};
  }
  std::error_code error;
  std::filesystem::create_directories(dir, error);  // a folder that cannot be made: said below
  if (error)
    throw std::runtime_error(
        std::string("OOMGUARD_REPORT_DIR=") + dir + ": cannot be created: " + error.message());
  const std::string text = report::to_json(doc).dump(2) + "\n";
  const std::string file = std::string(dir) + "/" + file_name_of(test);
  write_file_atomically(file + ".json", text);
  // Under ctest --repeat each run draws a new seed: its report is kept beside the latest.
  if (record.seed_drawn)
    write_file_atomically(file + ".seed-" + std::to_string(record.seed) + ".json", text);
}

// At each test's start: a test run again in the same process (--gtest_repeat) starts a new
// record, so its report holds the phases of that run only, and the device is readied again
// before its first measure().
class TestStarts final : public ::testing::EmptyTestEventListener {
  void OnTestStart(const ::testing::TestInfo& info) override {
    {
      std::lock_guard<std::mutex> lock(g_mutex);
      g_tests.erase(std::string(info.test_suite_name()) + "." + info.name());
    }
    device_not_ready();
  }
};

}  // namespace

void watch_test_starts() {
  static const bool added = [] {
    ::testing::UnitTest::GetInstance()->listeners().Append(new TestStarts);  // owned there
    return true;
  }();
  (void)added;
}

std::string file_name_of(std::string test) {
  for (char& c : test)
    c = c == '/' ? '_' : c;
  return test;
}

std::string current_test_name() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  if (info == nullptr)
    return "(no test)";
  return std::string(info->test_suite_name()) + "." + info->name();
}

void record_phase(const PhaseResult& result) {
  watch_test_starts();
  std::lock_guard<std::mutex> lock(g_mutex);
  TestRecord& record = g_tests[result.test];
  PhaseEntry& entry = record.phases.emplace_back();
  entry.result = result;
  entry.status = result.oom.empty() ? memory::PhaseStatus::kPass : memory::PhaseStatus::kOom;
  write_report(result.test, record);
}

void record_verdict(
    const PhaseResult& result,
    int64_t budget_bytes,
    memory::PhaseStatus status,
    const BudgetCheck* check) {
  std::lock_guard<std::mutex> lock(g_mutex);
  TestRecord& record = g_tests[result.test];
  for (auto it = record.phases.rbegin(); it != record.phases.rend(); ++it) {
    if (it->result.name != result.name)
      continue;
    if (budget_bytes > 0)
      it->budget_bytes = budget_bytes;
    if (check != nullptr) {
      it->budget_key = check->key.device_key();
      it->budget_predicted = check->predicted;
    }
    if (status != memory::PhaseStatus::kPass)
      it->status = status;
    break;
  }
  write_report(result.test, record);
}

std::map<std::string, MeasuredTest> measured_tests() {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::map<std::string, MeasuredTest> tests;
  for (const auto& [test, record] : g_tests)
    for (const PhaseEntry& entry : record.phases) {
      MeasuredTest& t = tests[test];
      if (t.phases.empty())
        t.budget_key = budget_check(entry.result).key.device_key();
      t.phases.push_back(entry.result.name);
    }
  return tests;
}

void record_seed(uint64_t seed, bool drawn) {
  std::lock_guard<std::mutex> lock(g_mutex);
  TestRecord& record = g_tests[current_test_name()];
  record.seed = seed;
  record.seed_drawn = drawn;
}

}  // namespace oomguard::testing::detail
