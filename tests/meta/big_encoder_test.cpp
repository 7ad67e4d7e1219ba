// A model of 1.34 billion parameters made of torch::nn modules, as a team writes one: an
// embedding of 32,000 tokens, a TransformerEncoder of 24 layers (d_model 2048, 16 heads,
// feed-forward 8192, dropout 0.1) and a head back to the vocabulary. Made with
// make_on_device() under OOMGUARD_DEVICE=meta, so that no parameter is ever made on the CPU
// (meta::MakeOnMeta), it trains one AdamW step on a batch of 4 x 512 tokens and is predicted
// for the cards of OOMGUARD_CARD and OOMGUARD_PREDICT. On the CPU it would need 5.4 GB for
// its parameters alone: elsewhere than on Meta the test skips. The ctest
// meta.torch_nn_encoder_of_1_3b runs it for an A100-80 (it fits) with a T4 predicted too (it
// does not); BM_NnEncoderOnMeta (tests/bench/run_bench.cpp) times the process and takes its
// largest resident set.
#include <iostream>
#include <string>

#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/randint.h>
#include <gtest/gtest.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/transformercoder.h>
#include <torch/optim/adamw.h>

#include <oomguard/gtest.h>
#include <oomguard/memory/tracking_allocator.h>

namespace oomguard::testing {
namespace {

namespace nn = torch::nn;

constexpr int64_t kVocab = 32000, kModel = 2048, kHeads = 16, kFeedForward = 8192, kLayers = 24;
constexpr int64_t kSequence = 512, kBatch = 4;

struct EncoderLMImpl : nn::Module {
  EncoderLMImpl() {
    embed = register_module("embed", nn::Embedding(kVocab, kModel));
    encoder = register_module(
        "encoder",
        nn::TransformerEncoder(nn::TransformerEncoderOptions(
            nn::TransformerEncoderLayerOptions(kModel, kHeads)
                .dim_feedforward(kFeedForward)
                .dropout(0.1),
            kLayers)));
    head = register_module("head", nn::Linear(kModel, kVocab));
  }
  // Token ids [sequence, batch] to logits [sequence, batch, vocabulary].
  at::Tensor forward(const at::Tensor& ids) { return head(encoder(embed(ids))); }

  nn::Embedding embed{nullptr};
  nn::TransformerEncoder encoder{nullptr};
  nn::Linear head{nullptr};
};
TORCH_MODULE(EncoderLM);

class BigEncoder : public MemoryTest {};

TEST_F(BigEncoder, MadeOnMetaTrainsAnAdamWStepAndIsPredicted) {
  if (!device().is_meta())
    GTEST_SKIP() << "1.34 billion parameters: run under OOMGUARD_DEVICE=meta";
  const int64_t cpu_before = memory::TrackingAllocator::instance().stats().allocated_bytes;
  EncoderLM model = make_on_device([] { return EncoderLM(); });
  EXPECT_LT(memory::TrackingAllocator::instance().stats().allocated_bytes - cpu_before, 1 << 20)
      << "the parameters were made on the CPU";
  int64_t parameters = 0;
  for (const at::Tensor& p : model->parameters()) {
    EXPECT_TRUE(p.is_meta());
    parameters += p.numel();
  }
  EXPECT_GT(parameters, 1'300'000'000);
  EXPECT_LT(parameters, 1'400'000'000);
  RecordProperty("parameters", std::to_string(parameters));

  torch::optim::AdamW adamw(model->parameters(), torch::optim::AdamWOptions(1e-4));
  const at::TensorOptions ids = at::TensorOptions().device(device()).dtype(at::kLong);
  const at::Tensor tokens = at::randint(kVocab, {kSequence, kBatch}, ids);
  const at::Tensor targets = at::randint(kVocab, {kSequence, kBatch}, ids);
  const PhaseResult train = measure("train", [&] {
    const at::Tensor logits = model(tokens);
    at::cross_entropy_loss(logits.view({-1, kVocab}), targets.view(-1)).backward();
    adamw.step();
    adamw.zero_grad();
  });
  ASSERT_FALSE(train.predictions.empty()) << "set OOMGUARD_CARD (and OOMGUARD_PREDICT)";
  for (const Prediction& p : train.predictions) {
    std::cout << "[ oomguard ] " << p.label << ": peak allocated " << p.peak_allocated_bytes
              << " B, reserved " << p.peak_reserved_bytes << " B, "
              << (p.fits() ? "fits" : "out of memory") << "\n";
    // 5.4 GB of parameters and 21.5 GB of AdamW state and gradients: more than a T4's 15 GiB.
    if (p.card == "t4") {
      EXPECT_FALSE(p.fits()) << "a T4 holds it?";
    }
    if (p.card == "a100-80") {
      EXPECT_TRUE(p.fits()) << p.oom;
    }
  }
}

}  // namespace
}  // namespace oomguard::testing
