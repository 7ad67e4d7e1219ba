// The GoogleTest layer predicting a card on CPU, as a user's test binary has it (linked with
// oomguard::gtest_main alone), on a model of its own: two linear layers and Adam. Run by
// prediction_check.sh with OOMGUARD_CARD (or OOMGUARD_CAPACITY) and OOMGUARD_PREDICT set;
// without a card the tests skip.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <ATen/core/grad_mode.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/scaled_dot_product_attention.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest-spi.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>
#include <torch/version.h>

#include <oomguard/amp/cuda_autocast.h>
#include <oomguard/gtest.h>
#include <oomguard/memory/alloc_site.h>
#include <oomguard/memory/budgets.h>
#include <oomguard/memory/cards.h>
#include <oomguard/memory/tracking_allocator.h>
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

// The cpu_scratch rule: a transposed convolution on the CPU allocates scratch besides its
// output (oneDNN's buffers, or slow_conv_transpose2d's columns); the card's kernel makes the
// output alone, so the predicted growth of the phase is the output, in the allocator's 512 B
// blocks. Without the rule (prediction_check.sh runs it so) the scratch is in it and this fails.
TEST_F(Prediction, AConvolutionsCpuScratchIsLeftOut) {
  torch::nn::ConvTranspose2d up(torch::nn::ConvTranspose2dOptions(32, 16, 4).stride(2).padding(1));
  const at::Tensor x = at::randn({8, 32, 32, 32});
  const PhaseResult idle = measure("idle", [] {});
  at::Tensor y;
  const PhaseResult forward = measure("conv_transpose", [&] {
    torch::NoGradGuard no_grad;
    y = up(x);
  });
  ASSERT_FALSE(forward.predictions.empty());
  const int64_t output = (y.nbytes() + 511) / 512 * 512;
  EXPECT_GT(forward.growth_bytes(), output) << "the CPU kernel allocated no scratch";
  EXPECT_EQ(
      forward.predictions.front().peak_allocated_bytes -
          idle.predictions.front().peak_allocated_bytes,
      output)
      << "the prediction is not the output alone";
  const auto& rules = forward.predictions.front().rules;
  const auto rule = std::find_if(
      rules.begin(), rules.end(), [](const auto& r) { return r.name == "cpu_scratch"; });
  ASSERT_NE(rule, rules.end()) << "the cpu_scratch rule is not listed";
  EXPECT_TRUE(contains(rule->detail, "aten::convolution")) << rule->detail;
}

// Under CUDA autocast at fp16 a convolution called directly casts its input, weight and bias
// and calls itself again: the casts are the card's, made inside the rule's operator, and in
// the prediction beside the output; only the CPU kernel's scratch is left out.
TEST_F(Prediction, TheCastsOfAutocastBeforeAConvolutionArePredicted) {
  const at::Tensor x = at::randn({8, 32, 32, 32});
  const at::Tensor w = at::randn({16, 32, 3, 3});
  const at::Tensor b = at::randn({16});
  const PhaseResult idle = measure("idle", [] {});
  at::Tensor y;
  const PhaseResult forward = measure("conv_fp16", [&] {
    torch::NoGradGuard no_grad;
    const amp::CudaAutocast autocast(at::kHalf);
    y = at::convolution(x, w, b, {1, 1}, {1, 1}, {1, 1}, false, {0, 0}, 1);
  });
  ASSERT_FALSE(forward.predictions.empty());
  ASSERT_EQ(y.scalar_type(), at::kHalf);
  const auto blocks = [](int64_t bytes) { return (bytes + 511) / 512 * 512; };
  const int64_t casts = blocks(x.numel() * 2) + blocks(w.numel() * 2) + blocks(b.numel() * 2);
  EXPECT_EQ(
      forward.predictions.front().peak_allocated_bytes -
          idle.predictions.front().peak_allocated_bytes,
      casts + blocks(y.nbytes()))
      << "the fp16 copies of input, weight and bias and the output, as the card holds them";
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

// Batches of different sizes: how much the pool holds depends on the order they come in.
// Step i takes batch i alone (its rows kBatchRows[i]), so its allocations depend on its index
// alone, as the order search needs. PREDICTION_ORDER ("0 3 1 2 ...") runs the steps in that
// order instead (prediction_check.sh runs the worst order a search named).
constexpr int64_t kBatchRows[] = {128, 2560, 1280, 2048, 1536, 3072, 1792, 2304};
constexpr int kBatches = 8;

PhaseResult train_in_order(const std::vector<int>& order) {
  torch::nn::Linear in(512, 2048), out(2048, 512);
  torch::optim::Adam adam({in->weight, in->bias, out->weight, out->bias});
  const auto step = [&](int i) {
    memory::AllocTag tag("mlp");
    const at::Tensor x = at::randn({kBatchRows[i], 512});
    out(at::relu(in(x))).pow(2).mean().backward();
    adam.step();
    adam.zero_grad();
  };
  if (!order.empty())
    return measure_steps("train", order, step);
  return measure_steps("train", kBatches, step);
}

std::vector<int> order_from_env() {
  std::vector<int> order;
  if (const char* text = env("PREDICTION_ORDER")) {
    std::istringstream in(text);
    for (int step = 0; in >> step;)
      order.push_back(step);
  }
  return order;
}

// The steps of a measure_steps() phase are searched in other orders: the order run, replayed,
// is what the model predicted live; the first step keeps its place; the worst order found is
// named; EXPECT_PHASE_FITS_CARD_IN_ANY_ORDER holds it to the card.
TEST_F(Prediction, TheStepsOfAPhaseAreSearchedInOtherOrders) {
  const std::vector<int> given = order_from_env();
  const PhaseResult phase = train_in_order(given);
  ASSERT_FALSE(phase.predictions.empty());
  for (const oomguard::testing::Prediction& p : phase.predictions) {
    std::cout << "[ orders ] " << p.label << " reserved " << p.peak_reserved_bytes;
    const StepOrders& o = p.orders;
    if (!p.fits()) {
      EXPECT_FALSE(o.searched()) << "a phase that ran out is not searched";
      EXPECT_EQ(o.why_not, "the phase ran out of memory in the order run");
      std::cout << " (out of memory)\n";
      continue;
    }
    if (const char* orders = env("OOMGUARD_ORDERS"); orders != nullptr && *orders == '0') {
      EXPECT_FALSE(o.searched());
      EXPECT_EQ(o.why_not, "OOMGUARD_ORDERS=0: the process is not recorded step by step");
      std::cout << " (no orders searched)\n";
      continue;
    }
    ASSERT_TRUE(o.searched()) << p.label << ": " << o.why_not;
    std::cout << " orders " << o.orders_tried << " recorded " << o.recorded_reserved_bytes
              << " lowest " << o.lowest_reserved_bytes << " highest " << o.highest_reserved_bytes
              << " order";
    for (const int step : o.highest_order)
      std::cout << " " << step;
    std::cout << "\n";
    EXPECT_GT(o.orders_tried, 3) << "steps of different sizes: orders beyond the sorted ones";
    EXPECT_EQ(o.recorded_reserved_bytes, p.peak_reserved_bytes)
        << "the order run, replayed, is what the model predicted as it ran";
    ASSERT_EQ(o.highest_order.size(), given.empty() ? size_t{kBatches} : given.size());
    EXPECT_EQ(o.highest_order.front(), given.empty() ? 0 : given.front())
        << "the first step keeps its place";
    std::vector<int> sorted = o.highest_order;
    std::sort(sorted.begin(), sorted.end());
    for (int i = 0; i < static_cast<int>(sorted.size()); ++i)
      EXPECT_EQ(sorted[static_cast<size_t>(i)], i) << "an order of the steps, each once";
  }
  if (env("PREDICTION_MARGIN") != nullptr) {
    EXPECT_PHASE_FITS_CARD_IN_ANY_ORDER(phase, env("PREDICTION_MARGIN"));
  }
}

// Two Adam steps of the MLP out(relu(in(x))) on device(), measured as the phase "train".
template <typename Linear>
PhaseResult train_mlp(Linear& in, Linear& out) {
  const c10::Device where = device();
  torch::optim::Adam adam({in->weight, in->bias, out->weight, out->bias});
  return measure("train", [&] {
    for (int step = 0; step < 2; ++step) {
      memory::AllocTag tag("mlp");
      const at::Tensor x = at::randn({256, 512}, at::TensorOptions().device(where));
      out(at::relu(in(x))).pow(2).mean().backward();
      adam.step();
      adam.zero_grad();
    }
  });
}

// A layer of your own whose parameters are made on a device given: a weight and a bias of
// torch::nn::Linear's shapes.
struct LinearOnImpl : torch::nn::Module {
  LinearOnImpl(int64_t in, int64_t out, c10::Device where)
      : weight(register_parameter("weight", at::randn({out, in}, at::device(where)) * 0.02)),
        bias(register_parameter("bias", at::zeros({out}, at::device(where)))) {}
  at::Tensor forward(const at::Tensor& x) { return at::addmm(bias, x, weight.t()); }
  at::Tensor weight, bias;
};
TORCH_MODULE(LinearOn);

// A model made on device(): under OOMGUARD_DEVICE=meta it exists as shapes alone, and the
// layer predicts the card from them; prediction_check.sh runs this test on the CPU and on the
// Meta device and finds the same prediction.
TEST_F(Prediction, AModelMadeOnTheDeviceIsPredictedFromItsShapes) {
  const c10::Device where = device();
  LinearOn in(512, 2048, where), out(2048, 512, where);
  const PhaseResult phase = train_mlp(in, out);
  ASSERT_FALSE(phase.predictions.empty());
  const char* asked = env("OOMGUARD_DEVICE");
  EXPECT_EQ(phase.meter, asked != nullptr && std::string(asked) == "meta" ? "meta" : "cpu");
  EXPECT_EQ(in->weight.device(), where);
  EXPECT_TRUE(phase.predictions.front().fits()) << phase.predictions.front().oom;
}

// A model of torch::nn modules made on the CPU and moved with to(device()), as a user's is:
// under OOMGUARD_DEVICE=meta its parameters move to Meta in place, and prediction_check.sh
// finds the same prediction as on the CPU.
TEST_F(Prediction, AModelMovedToTheDeviceIsPredictedFromItsShapes) {
  const c10::Device where = device();
  torch::nn::Linear in(512, 2048), out(2048, 512);
  in->to(where);
  out->to(where);
  const PhaseResult phase = train_mlp(in, out);
  ASSERT_FALSE(phase.predictions.empty());
  EXPECT_EQ(in->weight.device(), where);
  EXPECT_EQ(in->named_parameters()["weight"].device(), where);
  EXPECT_TRUE(phase.predictions.front().fits()) << phase.predictions.front().oom;
}

// The same model made with make_on_device(): under OOMGUARD_DEVICE=meta made on Meta from the
// start (meta::MakeOnMeta), no parameter ever on the CPU; elsewhere made and moved.
TEST_F(Prediction, AModelMadeWithMakeOnDeviceIsPredictedFromItsShapes) {
  const int64_t cpu_before = memory::TrackingAllocator::instance().stats().allocated_bytes;
  auto in = make_on_device([] { return torch::nn::Linear(512, 2048); });
  auto out = make_on_device([] { return torch::nn::Linear(2048, 512); });
  if (device().is_meta()) {
    EXPECT_LT(memory::TrackingAllocator::instance().stats().allocated_bytes - cpu_before, 64 << 10)
        << "the parameters were made on the CPU";
  }
  const PhaseResult phase = train_mlp(in, out);
  ASSERT_FALSE(phase.predictions.empty());
  EXPECT_EQ(in->weight.device(), device());
  EXPECT_TRUE(phase.predictions.front().fits()) << phase.predictions.front().oom;
}

// The helper that puts a user's samples worst-first: longest first, ties in their order.
TEST(WorstFirst, LongestFirstTiesInTheirOrder) {
  EXPECT_EQ(worst_first(std::vector<int64_t>{3, 9, 1, 9, 4}), (std::vector<size_t>{1, 3, 4, 0, 2}));
  const std::vector<std::string> samples = {"ab", "abcd", "a", "wxyz"};
  EXPECT_EQ(
      worst_first(samples, [](const std::string& s) { return s.size(); }),
      (std::vector<std::string>{"abcd", "wxyz", "ab", "a"}));
  EXPECT_TRUE(worst_first(std::vector<int64_t>{}).empty());
}

}  // namespace
}  // namespace oomguard::testing
