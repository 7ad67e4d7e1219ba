// The GoogleTest layer predicting a card on CPU, as a user's test binary has it (linked with
// oomguard::gtest_main alone), on a model of its own: two linear layers and Adam. Run by
// prediction_check.sh with OOMGUARD_CARD (or OOMGUARD_CAPACITY) and OOMGUARD_PREDICT set;
// without a card the tests skip.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <unistd.h>

#include <ATen/core/grad_mode.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/scaled_dot_product_attention.h>
#include <gtest/gtest-spi.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>
#include <torch/version.h>

#include <oomguard/gtest.h>
#include <oomguard/memory/alloc_site.h>
#include <oomguard/memory/budgets.h>
#include <oomguard/memory/cards.h>
#include <oomguard/sim/gpu_rules.h>

namespace oomguard::testing {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

const char* env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

class Prediction : public MemoryTest {
 protected:
  void SetUp() override {
    if (env("OOMGUARD_CARD") == nullptr && env("OOMGUARD_CAPACITY") == nullptr)
      GTEST_SKIP() << "neither OOMGUARD_CARD nor OOMGUARD_CAPACITY is set";
    MemoryTest::SetUp();
  }

  // A training step of a small MLP: GEMMs in the forward and in autograd's backward.
  PhaseResult train(const std::string& name, int steps) {
    torch::nn::Linear in(512, 2048), out(2048, 512);
    torch::optim::Adam adam({in->weight, in->bias, out->weight, out->bias});
    return measure(name, [&] {
      for (int step = 0; step < steps; ++step) {
        memory::AllocTag tag("mlp");
        const at::Tensor x = at::randn({256, 512});
        const at::Tensor loss = out(at::relu(in(x))).pow(2).mean();
        loss.backward();
        adam.step();
        adam.zero_grad();
      }
    });
  }
};

TEST_F(Prediction, TrainStepIsPredictedForTheCardWithTheWorkspaceRule) {
  const PhaseResult phase = train("train", 2);
  ASSERT_FALSE(phase.predictions.empty());
  const oomguard::testing::Prediction& p = phase.predictions.front();
  const char* card = env("OOMGUARD_CARD");
  EXPECT_EQ(p.card, card != nullptr ? card : "");
  EXPECT_TRUE(p.fits()) << p.oom;
  // A CUDA run allocates block sizes, not the CPU's bytes, and its cuBLAS workspaces; it
  // reserves whole segments.
  ASSERT_EQ(p.rules.size(), 1u);
  EXPECT_EQ(p.rules[0].name, "cublas_workspace");
  const int sm =
      card != nullptr ? memory::find_card(card).compute_capability : memory::kDefaultModelSm;
  const sim::CublasWorkspace expected =
      sim::cublas_workspace(sm, {TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR}, "", 2);
  EXPECT_EQ(p.rules[0].bytes, expected.bytes()) << "both handles ran a GEMM";
  EXPECT_EQ(p.rules[0].detail, expected.describe());
  EXPECT_GE(p.peak_allocated_bytes, expected.bytes());
  EXPECT_GT(p.peak_reserved_bytes, p.peak_allocated_bytes);
  EXPECT_GT(p.peak_reserved_bytes, phase.peak_allocated_bytes) << "reserved above allocated";
  EXPECT_EQ(phase.peak_reserved_bytes, -1) << "the measured figures stay the CPU's";
  EXPECT_PHASE_RESERVED_BELOW(phase, "1GiB");
  const ::testing::AssertionResult low = phase_reserved_below("phase", "\"1MiB\"", phase, "1MiB");
  ASSERT_FALSE(low);
  EXPECT_TRUE(contains(low.message(), p.label + ": peak reserved ")) << low.message();
}

// An evaluation takes the forward thread's cuBLAS workspace alone; the layer takes both before
// the first phase of the process and empties the cache before each test (Note [a test
// measures the same whatever ran before it], harness/gtest/measure.cpp), so
// prediction_check.sh finds this test's figures the same run alone and after the training
// test above.
TEST_F(Prediction, AnEvaluationMeasuresTheSameAloneOrAfterTraining) {
  torch::nn::Linear in(512, 2048), out(2048, 512);
  const at::NoGradGuard no_grad;
  const PhaseResult phase = measure("evaluate", [&] {
    memory::AllocTag tag("mlp");
    const at::Tensor y = out(at::relu(in(at::randn({256, 512}))));
  });
  ASSERT_FALSE(phase.predictions.empty());
  const oomguard::testing::Prediction& p = phase.predictions.front();
  ASSERT_EQ(p.rules.size(), 1u);
  const char* card = env("OOMGUARD_CARD");
  const int sm =
      card != nullptr ? memory::find_card(card).compute_capability : memory::kDefaultModelSm;
  EXPECT_EQ(
      p.rules[0].bytes,
      sim::cublas_workspace(sm, {TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR}, "", 2).bytes())
      << "both handles' workspaces are held from the phase's start";
}

// OOMGUARD_PREDICT adds targets; each gets its own verdict in the result and the message.
TEST_F(Prediction, SeveralSettingsOneVerdictEach) {
  const char* extra = env("OOMGUARD_PREDICT");
  if (extra == nullptr)
    GTEST_SKIP() << "OOMGUARD_PREDICT is not set";
  const PhaseResult phase = train("train", 1);
  ASSERT_GE(phase.predictions.size(), 2u);
  bool some_fit = false, some_do_not = false;
  for (const auto& p : phase.predictions) {
    some_fit = some_fit || p.fits();
    some_do_not = some_do_not || !p.fits();
    EXPECT_FALSE(p.label.empty());
  }
  // prediction_check.sh asks for a capacity too small for the step alongside ones it fits.
  ASSERT_TRUE(some_fit && some_do_not);
  const ::testing::AssertionResult verdict = phase_fits_card("phase", "\"10%\"", phase, "10%");
  ASSERT_FALSE(verdict);
  for (const auto& p : phase.predictions)
    EXPECT_TRUE(contains(
        verdict.message(), "\n  " + p.label + ": " + (p.fits() ? "fits" : "out of memory")))
        << verdict.message();
  const ::testing::AssertionResult bad = phase_fits_card("phase", "\"ten\"", phase, "ten");
  ASSERT_FALSE(bad);
  EXPECT_TRUE(contains(bad.message(), "the margin \"ten\": ")) << bad.message();
}

// The budgets' cuda:<card> entry is accepted from and checked against the prediction.
TEST_F(Prediction, BudgetsOfTheCardComeFromThePrediction) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("oomguard_prediction_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string budgets = (dir / "budgets.json").string();
  ::setenv("OOMGUARD_BUDGETS", budgets.c_str(), 1);
  ::setenv("OOMGUARD_ACCEPT", "1", 1);
  const PhaseResult phase = train("evaluate", 1);
  EXPECT_PHASE_WITHIN_BUDGET(phase);
  ::unsetenv("OOMGUARD_ACCEPT");
  const memory::BudgetFile file = memory::load_budgets(budgets);
  const auto& p = phase.predictions.front();
  const auto& entries = file.budgets.at(phase.test).at("evaluate");
  const std::string key = p.card.empty() ? "cuda" : "cuda:" + p.card;
  ASSERT_EQ(entries.count(key), 1u) << "accepted under " << entries.begin()->first;
  EXPECT_EQ(entries.at(key), memory::accepted_budget(p.peak_allocated_bytes, file.headroom));
  EXPECT_PHASE_WITHIN_BUDGET(phase);
  // A budget below the prediction fails, saying the figure is the model's.
  memory::accept_budget(budgets, {phase.test, "evaluate", "cuda", p.card, true}, 1);
  const ::testing::AssertionResult over = phase_within_budget("phase", phase);
  ASSERT_FALSE(over);
  EXPECT_TRUE(contains(over.message(), "predicted for " + p.label)) << over.message();
  ::unsetenv("OOMGUARD_BUDGETS");
  std::filesystem::remove_all(dir);
}

// A causal self-attention stack trained with scaled_dot_product_attention (fp32), with or
// without attention dropout: on CPU the dropout run takes the math path, which keeps three
// B x H x T x T tensors per layer for backward; on a T4 both take the memory-efficient
// kernel, which keeps a log-sum-exp.
PhaseResult train_attention(const std::string& name, double dropout) {
  constexpr int64_t kBatch = 4, kLength = 256, kWidth = 256, kHeads = 8, kLayers = 2;
  std::vector<torch::nn::Linear> qkv, out;
  std::vector<at::Tensor> parameters;
  for (int64_t l = 0; l < kLayers; ++l) {
    qkv.emplace_back(kWidth, 3 * kWidth);
    out.emplace_back(kWidth, kWidth);
    for (const auto& p : qkv.back()->parameters())
      parameters.push_back(p);
    for (const auto& p : out.back()->parameters())
      parameters.push_back(p);
  }
  torch::optim::Adam adam(parameters);
  return measure(name, [&] {
    memory::AllocTag tag("encoder");
    at::Tensor x = at::randn({kBatch, kLength, kWidth});
    for (int64_t l = 0; l < kLayers; ++l) {
      const auto split = qkv[l](x)
                             .view({kBatch, kLength, 3, kHeads, kWidth / kHeads})
                             .permute({2, 0, 3, 1, 4})
                             .unbind(0);
      const at::Tensor y =
          at::scaled_dot_product_attention(split[0], split[1], split[2], {}, dropout, true);
      x = x + out[l](y.transpose(1, 2).reshape({kBatch, kLength, kWidth}));
    }
    x.pow(2).mean().backward();
    adam.step();
    adam.zero_grad();
  });
}

TEST_F(Prediction, AttentionKeepsWhatTheCardsKernelKeeps) {
  const PhaseResult plain = train_attention("attention", 0.0);
  const PhaseResult dropout = train_attention("attention_dropout", 0.1);
  ASSERT_FALSE(plain.predictions.empty());
  ASSERT_FALSE(dropout.predictions.empty());
  const auto& p = plain.predictions.front();
  const auto& d = dropout.predictions.front();
  const int64_t cpu_more = dropout.peak_allocated_bytes - plain.peak_allocated_bytes;
  const int64_t card_more = d.peak_allocated_bytes - p.peak_allocated_bytes;
  std::cout << "[ oomguard ] attention with dropout, more at the peak: CPU " << cpu_more
            << " B, predicted for " << p.label << " " << card_more << " B\n";
  // Two layers of the math path's softmax, mask and dropped weights (4 x 8 x 256 x 256 fp32).
  EXPECT_GE(cpu_more, 2 * 2 * 4 * 8 * 256 * 256 * 4) << "the CPU's math path kept less";
  EXPECT_LT(std::abs(card_more), cpu_more / 16) << "the card's kernel keeps the same either way";
  for (const auto* phase : {&plain, &dropout}) {
    const auto& rules = phase->predictions.front().rules;
    const auto rule = std::find_if(
        rules.begin(), rules.end(), [](const auto& r) { return r.name == "sdpa_attention"; });
    ASSERT_NE(rule, rules.end()) << phase->name << ": the attention rule is not listed";
    const char* card = env("OOMGUARD_CARD");
    if (card == nullptr || memory::find_card(card).compute_capability < 80) {
      EXPECT_TRUE(contains(rule->detail, ": mem-efficient")) << rule->detail;
    }
    EXPECT_TRUE(contains(rule->detail, "2 call(s)")) << rule->detail;
  }
}

// A backward that stops halfway through an attention call's nodes (a gradient for q alone)
// leaves no window open: what the next phase allocates is in the prediction.
TEST_F(Prediction, AnAttentionBackwardStoppedHalfwayHoldsNothingBack) {
  measure("partial", [] {
    const auto input = [] { return at::randn({2, 4, 128, 32}).requires_grad_(); };
    const at::Tensor q = input(), k = input(), v = input();
    const at::Tensor y = at::scaled_dot_product_attention(q, k, v, {}, 0.1, true);
    torch::autograd::grad({y.sum()}, {q});
  });
  const PhaseResult idle = measure("idle", [] {});
  const PhaseResult after =
      measure("after", [] { const at::Tensor t = at::empty({8 << 20}, at::kByte); });
  ASSERT_FALSE(after.predictions.empty());
  EXPECT_GE(
      after.predictions.front().peak_allocated_bytes -
          idle.predictions.front().peak_allocated_bytes,
      8 << 20)
      << "an allocation after the stopped backward is missing from the prediction";
}

}  // namespace
}  // namespace oomguard::testing
