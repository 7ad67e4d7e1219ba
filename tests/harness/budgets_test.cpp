// harness/memory/budgets: the budgets file, accepting into it, the verdict.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <oomguard/memory/budgets.h>
#include <oomguard/memory/sizes.h>

namespace oomguard::memory {
namespace {

class BudgetsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("oomguard_budgets_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "budgets.json").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void write(const std::string& text) { std::ofstream(path_) << text; }

  std::filesystem::path dir_;
  std::string path_;
};

TEST_F(BudgetsTest, MissingFileIsEmptyWithDefaultHeadroom) {
  const BudgetFile file = load_budgets(path_);
  EXPECT_TRUE(file.budgets.empty());
  EXPECT_DOUBLE_EQ(file.headroom, 0.10);
}

TEST_F(BudgetsTest, CardKeyFirstThenDevice) {
  write(R"({"schema": "oomguard.budgets/1", "budgets": {"A.B": {"evaluate":
           {"cuda": "40MiB", "cuda:t4": "41MiB", "cpu": "38MiB"}}}})");
  const BudgetFile file = load_budgets(path_);
  EXPECT_EQ(file.find({"A.B", "evaluate", "cuda", "t4"}), parse_size("41MiB"));
  EXPECT_EQ(file.find({"A.B", "evaluate", "cuda", "h200"}), parse_size("40MiB"));
  EXPECT_EQ(file.find({"A.B", "evaluate", "cpu", "t4"}), parse_size("38MiB"));
  EXPECT_FALSE(file.find({"A.B", "train", "cpu", ""}).has_value());
  EXPECT_FALSE(file.find({"A.C", "evaluate", "cpu", ""}).has_value());
  EXPECT_EQ(file.accept_key({"A.B", "evaluate", "cuda", "t4"}), "cuda:t4");
  EXPECT_EQ(file.accept_key({"A.B", "evaluate", "cuda", "h200"}), "cuda");
}

struct BadFile {
  const char* text;
  const char* message_part;  // the error names this
};

TEST_F(BudgetsTest, MalformedFilesAreRefusedNamingTheEntry) {
  const std::vector<BadFile> cases = {
      {"{", "not JSON"},
      {"[]", "expected an object"},
      {R"({"schema": "other/1"})", "\"schema\" must be \"oomguard.budgets/1\""},
      {R"({"schema": "oomguard.budgets/1", "headroom": -1})", "\"headroom\""},
      {R"({"schema": "oomguard.budgets/1", "budgets": {"A.B": 3}})", "budgets.A.B must be"},
      {R"({"schema": "oomguard.budgets/1", "budgets": {"A.B": {"x": {"tpu": "1MiB"}}}})",
       "budgets.A.B.x.tpu: the key must be cpu, cuda or meta"},
      {R"({"schema": "oomguard.budgets/1", "budgets": {"A.B": {"x": {"cpu": 5}}}})",
       "budgets.A.B.x.cpu must be a size"},
      {R"({"schema": "oomguard.budgets/1", "budgets": {"A.B": {"x": {"cpu": "5XB"}}}})",
       "budgets.A.B.x.cpu: "},
  };
  for (const BadFile& c : cases) {
    write(c.text);
    try {
      load_budgets(path_);
      ADD_FAILURE() << "accepted: " << c.text;
    } catch (const std::invalid_argument& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(path_), std::string::npos) << message;
      EXPECT_NE(message.find(c.message_part), std::string::npos) << c.text << " -> " << message;
    }
  }
}

TEST_F(BudgetsTest, AcceptedBudgetPrintsWhatItMeans) {
  for (const int64_t peak :
       {int64_t{1},
        int64_t{1000},
        int64_t{3} << 20,
        int64_t{82260214},
        int64_t{5} << 30,
        int64_t{123456789}}) {
    const int64_t budget = accepted_budget(peak, 0.10);
    EXPECT_GE(budget, static_cast<int64_t>(static_cast<double>(peak) * 1.10)) << peak;
    EXPECT_EQ(parse_size(format_size(budget)), budget) << peak;
    EXPECT_LE(budget, static_cast<int64_t>(static_cast<double>(peak) * 1.11) + 1024) << peak;
  }
}

TEST_F(BudgetsTest, AcceptKeepsEveryOtherEntryAndTheHeadroom) {
  write(R"({"schema": "oomguard.budgets/1", "headroom": 0.25, "budgets":
           {"Other.Test": {"train": {"cuda:t4": "1GiB"}}}})");
  const int64_t budget = accept_budget(path_, {"A.B", "evaluate", "cpu", ""}, 4 << 20);
  EXPECT_EQ(budget, parse_size("5MiB"));
  const BudgetFile file = load_budgets(path_);
  EXPECT_DOUBLE_EQ(file.headroom, 0.25);
  EXPECT_EQ(file.find({"Other.Test", "train", "cuda", "t4"}), parse_size("1GiB"));
  EXPECT_EQ(file.find({"A.B", "evaluate", "cpu", ""}), budget);
}

// Tests running side by side (ctest -j) accept into one file: none of their entries is lost.
TEST_F(BudgetsTest, ConcurrentAcceptsLoseNothing) {
  constexpr int kWriters = 8;
  std::vector<std::thread> writers;
  for (int i = 0; i < kWriters; ++i)
    writers.emplace_back([this, i] {
      accept_budget(path_, {"Suite.Test" + std::to_string(i), "train", "cpu", ""}, (i + 1) << 20);
    });
  for (std::thread& t : writers)
    t.join();
  const BudgetFile file = load_budgets(path_);
  EXPECT_EQ(file.budgets.size(), static_cast<size_t>(kWriters));
  for (int i = 0; i < kWriters; ++i)
    EXPECT_TRUE(file.find({"Suite.Test" + std::to_string(i), "train", "cpu", ""}).has_value()) << i;
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_), {}), 1)
      << "accepting left files beside the budgets";
}

TEST(Outcome, OneRankingFromPassToNoReport) {
  const std::vector<PhaseStatus> order = {
      PhaseStatus::kPass,
      PhaseStatus::kNearOom,
      PhaseStatus::kBudgetExceeded,
      PhaseStatus::kOom,
      PhaseStatus::kDeviceError,
      PhaseStatus::kInterrupted,
      PhaseStatus::kError};
  for (size_t i = 0; i < order.size(); ++i)
    for (size_t j = 0; j < order.size(); ++j)
      EXPECT_EQ(worst(order[i], order[j]), order[std::max(i, j)])
          << order[i] << " and " << order[j];
  EXPECT_EQ(worst(PhaseStatus::kNotRun, PhaseStatus::kPass), PhaseStatus::kNotRun);
  EXPECT_EQ(worst(PhaseStatus::kPass, PhaseStatus::kNotRun), PhaseStatus::kPass);
  for (PhaseStatus s : order)
    EXPECT_EQ(phase_status_from_string(to_string(s)), s);
  EXPECT_EQ(phase_status_from_string("not_run"), PhaseStatus::kNotRun);
  EXPECT_THROW(phase_status_from_string("Pass"), std::invalid_argument);
}

TEST(Verdict, BudgetThenRetries) {
  EXPECT_EQ(phase_verdict(10, 20, 0, false), PhaseStatus::kPass);
  EXPECT_EQ(phase_verdict(30, 20, 0, false), PhaseStatus::kBudgetExceeded);
  EXPECT_EQ(phase_verdict(30, 20, 2, true), PhaseStatus::kBudgetExceeded);
  EXPECT_EQ(phase_verdict(10, 20, 2, false), PhaseStatus::kPass);
  EXPECT_EQ(phase_verdict(10, 20, 2, true), PhaseStatus::kNearOom);
  EXPECT_STREQ(to_string(PhaseStatus::kBudgetExceeded), "budget_exceeded");
  EXPECT_EQ(
      over_budget_message(
          "evaluate",
          "CharLM.Memory",
          parse_size("41.2MiB"),
          parse_size("38MiB"),
          parse_size("2MiB")),
      "phase evaluate of CharLM.Memory peaked at 41.2MiB, over its budget 38MiB (started at 2MiB)");
  EXPECT_EQ(over_budget_message("evaluate", "CharLM.Memory", 10, 10, 0), "");
  EXPECT_EQ(requested_bytes_from_oom_message("Tried to allocate 20.00 MiB. GPU 0"), 20 << 20);
  EXPECT_EQ(requested_bytes_from_oom_message("no size here"), -1);
}

}  // namespace
}  // namespace oomguard::memory
