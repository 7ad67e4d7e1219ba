// The models of autocast_reference.py, in torch::nn: a GPT (embeddings, layer norms, linear
// layers, attention written out, cross-entropy) and a conv net (convolutions, batch norm,
// pooling, a linear head), each made on the CPU and moved with to(device()), their forward
// and loss a measured phase with CUDA autocast on (fp16, bf16) or off (fp32), as a program
// that trains in mixed precision on a card runs them. autocast_check.sh runs the binary on
// the CPU and on Meta with a T4 and holds each predicted peak to PyTorch's own figure.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include <ATen/ops/scaled_dot_product_attention.h>
#include <torch/nn/functional.h>
#include <torch/nn/modules.h>

#include <oomguard/amp/cuda_autocast.h>
#include <oomguard/gtest.h>

namespace oomguard::testing {
namespace {

// The shapes of autocast_reference.py.
constexpr int64_t kD = 256, kHeads = 4, kLayers = 2, kVocab = 2048, kBatch = 4, kTokens = 128;
constexpr int64_t kConvBatch = 8, kChannels = 3, kSide = 64, kClasses = 10;

struct BlockImpl : torch::nn::Module {
  BlockImpl()
      : ln1(register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({kD})))),
        ln2(register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({kD})))),
        qkv(register_module("qkv", torch::nn::Linear(kD, 3 * kD))),
        proj(register_module("proj", torch::nn::Linear(kD, kD))),
        fc1(register_module("fc1", torch::nn::Linear(kD, 4 * kD))),
        fc2(register_module("fc2", torch::nn::Linear(4 * kD, kD))) {}

  at::Tensor forward(at::Tensor x) {
    const auto qkv_heads =
        qkv(ln1(x)).view({kBatch, kTokens, 3, kHeads, kD / kHeads}).permute({2, 0, 3, 1, 4});
    const auto parts = qkv_heads.unbind(0);
    auto w = at::matmul(parts[0], parts[1].transpose(-2, -1)) *
             (1.0 / std::sqrt(static_cast<double>(kD / kHeads)));
    const auto mask =
        at::ones({kTokens, kTokens}, at::TensorOptions(x.device()).dtype(at::kBool)).triu(1);
    w = w.masked_fill(mask, -std::numeric_limits<double>::infinity());
    const auto a = at::matmul(at::softmax(w, -1), parts[2]);
    x = x + proj(a.transpose(1, 2).reshape({kBatch, kTokens, kD}));
    return x + fc2(at::gelu(fc1(ln2(x))));
  }

  torch::nn::LayerNorm ln1, ln2;
  torch::nn::Linear qkv, proj, fc1, fc2;
};
TORCH_MODULE(Block);

struct GptImpl : torch::nn::Module {
  GptImpl()
      : tok(register_module("tok", torch::nn::Embedding(kVocab, kD))),
        pos(register_module("pos", torch::nn::Embedding(kTokens, kD))),
        blocks(register_module("blocks", torch::nn::ModuleList())),
        lnf(register_module("lnf", torch::nn::LayerNorm(torch::nn::LayerNormOptions({kD})))),
        head(register_module(
            "head", torch::nn::Linear(torch::nn::LinearOptions(kD, kVocab).bias(false)))) {
    for (int64_t i = 0; i < kLayers; ++i)
      blocks->push_back(Block());
  }

  at::Tensor forward(const at::Tensor& idx) {
    auto x = tok(idx) + pos(at::arange(kTokens, at::TensorOptions(idx.device()).dtype(at::kLong)));
    for (const auto& block : *blocks)
      x = block->as<Block>()->forward(x);
    return head(lnf(x));
  }

  torch::nn::Embedding tok, pos;
  torch::nn::ModuleList blocks;
  torch::nn::LayerNorm lnf;
  torch::nn::Linear head;
};
TORCH_MODULE(Gpt);

struct ConvNetImpl : torch::nn::Module {
  ConvNetImpl()
      : c1(register_module(
            "c1", torch::nn::Conv2d(torch::nn::Conv2dOptions(kChannels, 32, 3).padding(1)))),
        b1(register_module("b1", torch::nn::BatchNorm2d(32))),
        c2(register_module(
            "c2", torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3).padding(1)))),
        b2(register_module("b2", torch::nn::BatchNorm2d(64))),
        fc(register_module("fc", torch::nn::Linear(64 * (kSide / 4) * (kSide / 4), kClasses))) {}

  // One operation a statement, so that a result nothing keeps dies when Python's would (a
  // C++ temporary lives to the end of its full expression: the batch norm's output of
  // max_pool2d(relu(bn(x))) would still be held while the pooling runs).
  at::Tensor forward(at::Tensor x) {
    namespace F = torch::nn::functional;
    x = b1(c1(x));
    x = at::relu(x);
    x = F::max_pool2d(x, F::MaxPool2dFuncOptions(2));
    x = b2(c2(x));
    x = at::relu(x);
    x = F::max_pool2d(x, F::MaxPool2dFuncOptions(2));
    return fc(x.flatten(1));
  }

  torch::nn::Conv2d c1;
  torch::nn::BatchNorm2d b1;
  torch::nn::Conv2d c2;
  torch::nn::BatchNorm2d b2;
  torch::nn::Linear fc;
};
TORCH_MODULE(ConvNet);

struct Case {
  const char* model;      // "gpt" or "convnet"
  const char* precision;  // "fp32", "fp16" or "bf16"
};

const Case kCases[] = {
    {"gpt", "fp32"},
    {"gpt", "fp16"},
    {"gpt", "bf16"},
    {"convnet", "fp32"},
    {"convnet", "fp16"},
    {"convnet", "bf16"},
};

std::optional<at::ScalarType> autocast_dtype(const std::string& precision) {
  if (precision == "fp16")
    return at::kHalf;
  if (precision == "bf16")
    return at::kBFloat16;
  return std::nullopt;
}

class AutocastForward : public MemoryTest, public ::testing::WithParamInterface<Case> {};

TEST_P(AutocastForward, AsTheCardRunsIt) {
  const Case c = GetParam();
  const c10::Device where = device();
  const auto on = [&](at::ScalarType dtype) { return at::TensorOptions(where).dtype(dtype); };
  at::Tensor out, loss;
  if (std::string(c.model) == "gpt") {
    Gpt model;
    model->to(where);
    const auto idx = at::randint(0, kVocab, {kBatch, kTokens}, on(at::kLong));
    const auto targets = at::randint(0, kVocab, {kBatch, kTokens}, on(at::kLong));
    measure("forward", [&] {
      amp::CudaAutocast autocast(autocast_dtype(c.precision));
      out = model(idx);
      loss = torch::nn::functional::cross_entropy(out.view({-1, kVocab}), targets.view(-1));
    });
  } else {
    ConvNet model;
    model->to(where);
    const auto images = at::randn({kConvBatch, kChannels, kSide, kSide}, on(at::kFloat));
    const auto targets = at::randint(0, kClasses, {kConvBatch}, on(at::kLong));
    measure("forward", [&] {
      amp::CudaAutocast autocast(autocast_dtype(c.precision));
      out = model(images);
      loss = torch::nn::functional::cross_entropy(out, targets);
    });
  }
  RecordProperty("output_dtype", c10::toString(out.scalar_type()));
  RecordProperty("loss_dtype", c10::toString(loss.scalar_type()));
  EXPECT_EQ(amp::cached_casts(), 0) << "clear_cache() ends the cast copies";
  const at::ScalarType expected = std::string(c.precision) == "fp32"   ? at::kFloat
                                  : std::string(c.precision) == "fp16" ? at::kHalf
                                                                       : at::kBFloat16;
  EXPECT_EQ(out.scalar_type(), expected);
  EXPECT_EQ(loss.scalar_type(), at::kFloat);
}

// The sdpa_attention rule picks the card's kernel by the dtype the kernel gets: under autocast
// q, k and v are cast first, so a T4 runs fp16 on its memory-efficient kernel and bf16 (which
// sm75 lacks there) on the math path. Needs OOMGUARD_CARD=t4 and the rules on.
TEST(AutocastRules, AttentionIsChosenByTheCastDtype) {
  const char* rules = std::getenv("OOMGUARD_RULES");
  if (rules != nullptr && std::string(rules) == "none")
    GTEST_SKIP() << "OOMGUARD_RULES=none";
  const char* card = std::getenv("OOMGUARD_CARD");
  if (card == nullptr || std::string(card) != "t4")
    GTEST_SKIP() << "needs OOMGUARD_CARD=t4";
  const auto options = at::TensorOptions(device()).dtype(at::kFloat);
  const auto q = at::randn({2, 4, 128, 64}, options).requires_grad_();
  for (const char* precision : {"fp16", "bf16"}) {
    const PhaseResult phase = measure(std::string("attention_") + precision, [&] {
      amp::CudaAutocast autocast(autocast_dtype(precision));
      const at::Tensor out = at::scaled_dot_product_attention(q, q, q, {}, 0.0, true);
      EXPECT_EQ(out.scalar_type(), autocast_dtype(precision).value());
    });
    ASSERT_FALSE(phase.predictions.empty());
    EXPECT_EQ(phase.end_allocated_bytes, phase.start_allocated_bytes)
        << "the casts of q are released with the cache at the region's end";
    std::string detail;
    for (const auto& rule : phase.predictions.front().rules)
      if (rule.name == "sdpa_attention")
        detail = rule.detail;
    const std::string expected =
        std::string(precision) == "fp16" ? "fp16: mem-efficient" : "bf16: math";
    EXPECT_NE(detail.find(expected), std::string::npos) << precision << ": " << detail;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models,
    AutocastForward,
    ::testing::ValuesIn(kCases),
    [](const ::testing::TestParamInfo<Case>& param) {
      return std::string(param.param.model) + "_" + param.param.precision;
    });

}  // namespace
}  // namespace oomguard::testing
