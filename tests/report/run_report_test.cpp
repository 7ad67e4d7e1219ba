// harness/report: oomguard.report/1 written by its one writer and read back by its one
// reader; what the reader refuses, naming the file and the field. Real reports are checked
// against harness/schemas/report.schema.json in tests/cli/schema_check.sh.
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "harness/report/replay_report.h"
#include "harness/report/run_report.h"
#include "harness/repeat/summary.h"
#include "harness/usage_error.h"

namespace oomguard::report {
namespace {

RunRecord example() {
  RunRecord r;
  r.outcome = memory::PhaseStatus::kOom;
  r.seed = 7;
  r.device.card = "t4";
  r.device.allocator_model = "cuda";
  r.device.model_rules = "cublas_workspace";
  r.torch_version = "2.15.0";
  r.capacity_bytes = 15'300'000'000;
  r.guards = {{"no_grad_eval", true}};
  r.config = {{"train", {{"steps", 2}}}};
  PhaseRecord& train = r.phases.emplace_back();
  train.name = "train";
  train.status = memory::PhaseStatus::kPass;
  train.start_allocated_bytes = 100;
  train.peak_allocated_bytes = 900;
  train.end_allocated_bytes = 300;
  train.budget_bytes = 1000;
  train.peak_reserved_bytes = 2 << 20;
  train.predicted_peak_allocated_bytes = 1024;
  train.steps = 2;
  train.wall_seconds = 0.5;
  train.live_at_peak = std::vector<memory::TagBytes>{{"head", 600}, {"(rest)", 300}};
  train.extra = {{"losses", {2.5, 2.25}}};
  PhaseRecord& evaluate = r.phases.emplace_back();
  evaluate.name = "evaluate";
  evaluate.status = memory::PhaseStatus::kOom;
  r.budget_rules.push_back({"cublas_workspace", 8'519'680, "1 handle x 8,519,680 B"});
  r.oom = OomRecord{"evaluate", 2 << 20, "Tried to allocate 2.00 MiB", {{"predicted", true}}};
  return r;
}

TEST(RunReport, WhatTheWriterWritesTheReaderReadsBack) {
  const nlohmann::json doc = to_json(example());
  EXPECT_EQ(doc.at("schema"), kRunReportSchema);
  EXPECT_EQ(doc.at("outcome"), "oom");
  EXPECT_EQ(doc.at("device_info").at("emulated_card"), "t4");
  EXPECT_TRUE(doc.at("device_info").at("name").is_null());
  EXPECT_TRUE(doc.at("phases")[1].at("live_at_peak").is_null());
  EXPECT_EQ(doc.at("phases")[0].at("losses")[1], 2.25);
  EXPECT_EQ(doc.at("oom").at("predicted"), true);
  EXPECT_FALSE(doc.contains("test"));
  const RunRecord back = run_record_from_json(doc, "r.json");
  EXPECT_EQ(to_json(back), doc);
  EXPECT_EQ(back.phases[0].live_at_peak->front().tag, "head");
  EXPECT_FALSE(back.phases[1].live_at_peak.has_value());
  EXPECT_EQ(back.phases[0].extra, (nlohmann::json{{"losses", {2.5, 2.25}}}));

  RunRecord test = example();
  test.test_name = "Model.Memory";
  test.test_source = "oomguard::gtest";
  EXPECT_EQ(run_record_from_json(to_json(test), "t.json").test_name, "Model.Memory");
}

void expect_refused(const nlohmann::json& doc, const std::string& words) {
  try {
    run_record_from_json(doc, "r.json");
    ADD_FAILURE() << "read: " << doc.dump();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("r.json: " + words), std::string::npos) << e.what();
  }
}

TEST(RunReport, TheReaderNamesTheFieldThatIsWrong) {
  const nlohmann::json good = to_json(example());
  nlohmann::json doc = good;
  doc["schema"] = "oomguard.report/2";
  expect_refused(doc, "schema oomguard.report/2 is not oomguard.report/1");
  expect_refused(nlohmann::json::array(), "not an oomguard report");
  doc = good;
  doc.erase("seed");
  expect_refused(doc, "the report has no \"seed\"");
  doc = good;
  doc["phases"][0]["peak_allocated_bytes"] = 1e30;
  expect_refused(doc, "phase train.peak_allocated_bytes is not a byte count");
  doc = good;
  doc["phases"][0]["budget_bytes"] = std::numeric_limits<int64_t>::min();
  expect_refused(doc, "phase train.budget_bytes is not a byte count");
  doc = good;
  doc["phases"][1]["status"] = "fine";
  expect_refused(doc, "phase evaluate.status: \"fine\" is not a phase status");
  doc = good;
  doc["device_info"]["emulated_card"] = 4;
  expect_refused(doc, "the report.device_info.emulated_card is not a string");
  doc = good;
  doc["device_info"]["type"] = "tpu";
  expect_refused(doc, "the report.device_info.type: \"tpu\" is not a device (cpu, cuda or meta)");
  doc = good;
  doc["oom"].erase("message");
  expect_refused(doc, "the report.oom has no \"message\"");
}

TEST(RunReport, ARepeatRunWhoseReportCannotBeReadIsAnError) {
  const repeat::Iteration ok = repeat::iteration_from_report(7, 3, 1.0, to_json(example()));
  EXPECT_EQ(ok.outcome, memory::PhaseStatus::kOom);
  EXPECT_EQ(ok.phases.size(), 2u);
  EXPECT_EQ(ok.detail, "out of memory in evaluate: Tried to allocate 2.00 MiB");
  nlohmann::json broken = to_json(example());
  broken["phases"] = "none";
  const repeat::Iteration bad = repeat::iteration_from_report(7, 3, 1.0, broken);
  EXPECT_EQ(bad.outcome, memory::PhaseStatus::kError);
  EXPECT_NE(bad.detail.find("the report.phases is not a list"), std::string::npos) << bad.detail;
  const repeat::Iteration none = repeat::iteration_from_report(7, 139, 1.0, nullptr);
  EXPECT_EQ(none.outcome, memory::PhaseStatus::kError);
  EXPECT_EQ(none.detail, "exit code 139 and no report");
}

}  // namespace
}  // namespace oomguard::report

namespace oomguard::report {
namespace {

TEST(ReplayReport, WhatTheWriterWritesTheReaderReadsBack) {
  ReplayRecord r;
  r.trace = "run.jsonl";
  ReplayFigures t4;
  t4.card = "t4";
  t4.capacity_bytes = 15'300'000'000;
  t4.torch_version = "2.15";
  t4.peak_reserved_bytes = 64 << 20;
  t4.cublas_workspace_bytes = 17'039'360;
  t4.cublas_workspace = "2 handles x 8,519,680 B";
  ReplayFigures small = t4;
  small.card = "";
  small.capacity_bytes = 32 << 20;
  small.alloc_conf = "expandable_segments:True";
  small.oom = {{"line", 12}, {"bytes", 2 << 20}};
  r.settings = {t4, small};
  r.phases.push_back({"train", 1, 2, 3, 4, 0, {{"head", 2}}});
  const nlohmann::json doc = to_json(r);
  EXPECT_EQ(doc.at("card"), "t4");  // the first setting at the top level
  EXPECT_EQ(doc.at("margin_bytes"), 15'300'000'000 - (64 << 20));
  EXPECT_TRUE(doc.at("settings")[1].at("card").is_null());
  EXPECT_EQ(doc.at("settings")[1].at("outcome"), "oom");
  EXPECT_FALSE(doc.contains("snapshot"));
  const ReplayRecord back = replay_record_from_json(doc, "replay.json");
  EXPECT_EQ(to_json(back), doc);
  EXPECT_FALSE(back.settings[1].fits());

  nlohmann::json bad = doc;
  bad["settings"][1].erase("alloc_conf");
  try {
    replay_record_from_json(bad, "replay.json");
    ADD_FAILURE() << "read without alloc_conf";
  } catch (const UsageError& e) {
    EXPECT_NE(
        std::string(e.what()).find("replay.json: setting 2 has no \"alloc_conf\""),
        std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace oomguard::report
