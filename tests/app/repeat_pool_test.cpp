// harness/app/repeat: the pool of a repeat's runs, through a launcher that runs nothing: which
// runs start when, with which GPU, and what becomes of their reports.
#include <gtest/gtest.h>

#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "harness/app/repeat.h"
#include "harness/report/run_report.h"

namespace oomguard::app {
namespace {

namespace fs = std::filesystem;

// Ends runs in the order they started; writes a passing report for each seed but the ones
// in `no_report`. Records what was running when each run started.
class FakeLauncher final : public RunLauncher {
 public:
  std::set<uint64_t> no_report;
  std::vector<RepeatRun> started;
  std::vector<std::vector<std::string>> gpus_running_at_start;  // per start, others' GPUs
  int stops = 0;

  int64_t start(const RepeatRun& run) override {
    std::vector<std::string> others;
    for (const auto& [id, r] : running_)
      others.push_back(gpu_of(r));
    gpus_running_at_start.push_back(others);
    started.push_back(run);
    const int64_t id = next_id_++;
    running_[id] = run;
    order_.push_back(id);
    return id;
  }

  std::optional<std::pair<int64_t, int>> wait_any() override {
    const int64_t id = order_.front();
    order_.pop_front();
    const RepeatRun run = running_.at(id);
    running_.erase(id);
    if (no_report.count(run.seed) != 0)
      return std::make_pair(id, 139);
    report::RunRecord r;
    r.seed = run.seed;
    r.torch_version = "2.15.0";
    report::PhaseRecord& p = r.phases.emplace_back();
    p.name = "train";
    p.status = memory::PhaseStatus::kPass;
    p.peak_allocated_bytes = 1000 + static_cast<int64_t>(run.seed);
    p.budget_bytes = 2000;
    report::write_run_record(r, run.report_path);
    return std::make_pair(id, 0);
  }

  void stop(int64_t) override { ++stops; }

  static std::string gpu_of(const RepeatRun& run) {
    for (const auto& e : run.env)
      if (e.rfind("CUDA_VISIBLE_DEVICES=", 0) == 0)
        return e.substr(21);
    return "";
  }

 private:
  std::map<int64_t, RepeatRun> running_;
  std::deque<int64_t> order_;
  int64_t next_id_ = 1;
};

class RepeatPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("oomguard-pool-" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::create_directories(dir_);
    plan_.seed_start = 10;
    plan_.runs = 5;
    plan_.program = "oomguard";
    plan_.run_args = {"--device", "cuda"};
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  repeat::Plan plan_;
};

TEST_F(RepeatPoolTest, EachRunningJobHasAGpuOfItsOwn) {
  FakeLauncher launcher;
  RepeatPool pool;
  pool.jobs = 2;
  pool.gpus = {"3", "5"};
  pool.dir = dir_.string();
  const repeat::Summary s = run_repeat(plan_, pool, launcher);
  ASSERT_EQ(s.iterations.size(), 5u);
  ASSERT_EQ(launcher.started.size(), 5u);
  for (size_t i = 0; i < launcher.started.size(); ++i) {
    const std::string gpu = FakeLauncher::gpu_of(launcher.started[i]);
    EXPECT_TRUE(gpu == "3" || gpu == "5") << "run " << i << " got GPU '" << gpu << "'";
    for (const auto& other : launcher.gpus_running_at_start[i])
      EXPECT_NE(other, gpu) << "run " << i << " shares GPU " << gpu;
    EXPECT_LE(launcher.gpus_running_at_start[i].size(), 1u) << "more than 2 jobs at once";
  }
  EXPECT_EQ(
      launcher.started[0].argv,
      (std::vector<std::string>{
          "oomguard",
          "run",
          "--seed",
          "10",
          "--report",
          (dir_ / "seed-10.json").string(),
          "--device",
          "cuda"}));
  for (const auto& it : s.iterations) {
    EXPECT_TRUE(it.passed()) << it.seed << ": " << it.detail;
    EXPECT_EQ(it.phases.at(0).peak_bytes, 1000 + static_cast<int64_t>(it.seed));
  }
}

TEST_F(RepeatPoolTest, OnCpuNoRunIsGivenAGpu) {
  FakeLauncher launcher;
  RepeatPool pool;
  pool.jobs = 3;
  pool.dir = dir_.string();
  run_repeat(plan_, pool, launcher);
  for (const auto& run : launcher.started)
    EXPECT_TRUE(run.env.empty());
  size_t most = 0;
  for (const auto& others : launcher.gpus_running_at_start)
    most = std::max(most, others.size() + 1);
  EXPECT_EQ(most, 3u);
}

TEST_F(RepeatPoolTest, ARunWithoutAReportIsAnErrorNamingItsOutput) {
  FakeLauncher launcher;
  launcher.no_report = {12};
  RepeatPool pool;
  pool.dir = dir_.string();
  const repeat::Summary s = run_repeat(plan_, pool, launcher);
  ASSERT_EQ(s.iterations.size(), 5u);
  EXPECT_EQ(s.iterations[2].seed, 12u);
  EXPECT_EQ(s.iterations[2].outcome, memory::PhaseStatus::kError);
  EXPECT_EQ(s.iterations[2].exit_code, 139);
  EXPECT_NE(s.iterations[2].detail.find((dir_ / "seed-12.log").string()), std::string::npos)
      << s.iterations[2].detail;
}

TEST_F(RepeatPoolTest, InterruptedItStartsNoMoreAndStopsTheRunning) {
  FakeLauncher launcher;
  RepeatPool pool;
  pool.jobs = 2;
  pool.dir = dir_.string();
  size_t ended = 0;
  pool.on_iteration = [&](const repeat::Iteration&, size_t done, size_t) { ended = done; };
  pool.interrupted = [&] { return ended >= 1; };
  const repeat::Summary s = run_repeat(plan_, pool, launcher);
  EXPECT_EQ(launcher.started.size(), 2u);
  EXPECT_EQ(launcher.stops, 1);  // the one still running when the first ended
  EXPECT_EQ(s.iterations.size(), 2u);
}

TEST(GpusForJobs, OneGpuPerJobOrARefusal) {
  EXPECT_TRUE(gpus_for_jobs(1, "cuda", 4, nullptr).empty());  // one job: the device as it is
  EXPECT_TRUE(gpus_for_jobs(3, "cpu", 4, nullptr).empty());
  EXPECT_TRUE(gpus_for_jobs(3, "meta", 0, nullptr).empty());  // shapes alone: no GPU
  EXPECT_TRUE(gpus_for_jobs(3, "auto", 0, nullptr).empty());  // auto without a GPU: the CPU
  EXPECT_EQ(gpus_for_jobs(2, "auto", 2, "4,6"), (std::vector<std::string>{"4", "6"}));
  EXPECT_EQ(gpus_for_jobs(2, "cuda", 3, nullptr), (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_THROW(gpus_for_jobs(2, "cuda", 1, nullptr), UsageError);
  EXPECT_THROW(gpus_for_jobs(2, "cuda", 0, nullptr), UsageError);
  EXPECT_THROW(gpus_for_jobs(2, "cuda:1", 4, nullptr), UsageError);
}

}  // namespace
}  // namespace oomguard::app
