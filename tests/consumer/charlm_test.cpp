// CharLM: a character language model with its own training and evaluation loops, and a test
// holding each loop to its memory budget (budgets.json, OOMGUARD_BUDGETS).
//
// CHARLM_EVAL_BUG=1 puts a classic bug back into the evaluation loop: no NoGradGuard, and
// the logits of every batch kept for later, so each batch's activations stay alive.
// CHARLM_TRAIN_BUG=1 one into the training loop: every step's logits kept (detached, "for a
// picture later"), 384 KiB more after each step.
//
// CharLMTest.LongTailFirst batches samples of different lengths worst-first
// (oomguard::testing::worst_first) and, with a card, holds its training to the card in every
// order of its steps the layer searches (EXPECT_PHASE_FITS_CARD_IN_ANY_ORDER).
#include <algorithm>
#include <cstdlib>
#include <optional>
#include <vector>

#include <torch/nn/functional/loss.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adamw.h>
#include <torch/types.h>

#include <oomguard/gtest.h>
#include <oomguard/memory/alloc_site.h>

namespace {

constexpr int64_t kVocab = 96, kContext = 64, kBatch = 16, kHidden = 256;

struct CharLMImpl : torch::nn::Module {
  CharLMImpl()
      : embed(register_module("embed", torch::nn::Embedding(kVocab, kHidden))),
        mixer(register_module("mixer", torch::nn::Linear(kHidden, 4 * kHidden))),
        head(register_module("head", torch::nn::Linear(4 * kHidden, kVocab))) {}

  // tokens [B, T] -> logits [B, T, V]
  torch::Tensor forward(const torch::Tensor& tokens) {
    torch::Tensor x;
    {
      oomguard::memory::AllocTag tag("embed");
      x = embed(tokens);  // [B, T, C]
    }
    oomguard::memory::AllocTag tag("mixer");
    return head(torch::gelu(mixer(x)));  // [B, T, 4C] -> [B, T, V]
  }

  torch::nn::Embedding embed;
  torch::nn::Linear mixer, head;
};
TORCH_MODULE(CharLM);

std::vector<torch::Tensor> make_batches(int64_t count) {
  std::vector<torch::Tensor> batches;
  for (int64_t i = 0; i < count; ++i)
    batches.push_back(torch::randint(kVocab, {kBatch, kContext + 1}, torch::kLong));
  return batches;
}

// A batch [B, T + 1]: each row's first T tokens in, its last T the targets. `logits_out`, when
// given, receives the logits [B, T, V].
torch::Tensor next_token_loss(
    CharLM& model, const torch::Tensor& batch, torch::Tensor* logits_out = nullptr) {
  using torch::indexing::Slice;
  const int64_t t = batch.size(1) - 1;
  const torch::Tensor logits = model->forward(batch.index({Slice(), Slice(0, t)}));
  if (logits_out != nullptr)
    *logits_out = logits;
  return torch::nn::functional::cross_entropy(
      logits.reshape({-1, kVocab}), batch.index({Slice(), Slice(1, t + 1)}).reshape(-1));
}

// One training step; with CHARLM_TRAIN_BUG the step's logits go into `kept`.
void train_step(
    CharLM& model,
    torch::optim::AdamW& optimizer,
    const torch::Tensor& batch,
    std::vector<torch::Tensor>& kept) {
  const bool bug = std::getenv("CHARLM_TRAIN_BUG") != nullptr;
  optimizer.zero_grad();
  torch::Tensor logits;  // held only with the bug: otherwise freed as backward frees the graph
  next_token_loss(model, batch, bug ? &logits : nullptr).backward();
  optimizer.step();
  if (bug)
    kept.push_back(logits.detach());
}

double evaluate(CharLM& model, const std::vector<torch::Tensor>& batches) {
  const bool bug = std::getenv("CHARLM_EVAL_BUG") != nullptr;
  model->eval();
  std::optional<torch::NoGradGuard> no_grad;
  if (!bug)
    no_grad.emplace();
  std::vector<torch::Tensor> kept;
  double total = 0.0;
  for (const torch::Tensor& batch : batches) {
    const torch::Tensor loss = next_token_loss(model, batch);
    total += loss.item<double>();
    if (bug)
      kept.push_back(loss);  // "for a report later": keeps the whole graph of the batch
  }
  return total / static_cast<double>(batches.size());
}

class CharLMTest : public oomguard::testing::MemoryTest {};

TEST_F(CharLMTest, Memory) {
  CharLM model;
  model->to(oomguard::testing::device());
  const std::vector<torch::Tensor> batches = make_batches(8);

  {
    torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(1e-3));
    model->train();
    std::vector<torch::Tensor> kept;
    const auto training = oomguard::testing::measure_steps("train", 8, [&](int step) {
      train_step(model, optimizer, batches[static_cast<size_t>(step)], kept);
    });
    EXPECT_PHASE_WITHIN_BUDGET(training);
    EXPECT_PHASE_NO_STEP_GROWTH(training, "16KiB");  // what each step leaves behind
  }

  double loss = 0.0;
  const auto evaluation =
      oomguard::testing::measure("evaluate", [&] { loss = evaluate(model, batches); });
  EXPECT_PHASE_WITHIN_BUDGET(evaluation);
  EXPECT_PHASE_GROWTH_BELOW(evaluation, "12MiB");
  EXPECT_PHASE_NO_NEAR_OOM(evaluation);
  EXPECT_GT(loss, 0.0);
}

// Samples of different lengths, a few long (a long tail), as a loader gives them.
std::vector<torch::Tensor> long_tail_samples(int64_t count) {
  std::vector<torch::Tensor> samples;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t length =
        i % 16 == 5 ? 4 * kContext : torch::randint(8, kContext, {1}).item<int64_t>();
    samples.push_back(torch::randint(kVocab, {length + 1}, torch::kLong));
  }
  return samples;
}

// `samples` in batches of kBatch, each padded to its longest sample (token 0).
std::vector<torch::Tensor> padded_batches(const std::vector<torch::Tensor>& samples) {
  std::vector<torch::Tensor> batches;
  for (size_t first = 0; first < samples.size(); first += kBatch) {
    const size_t end = std::min(samples.size(), first + kBatch);
    int64_t longest = 0;
    for (size_t i = first; i < end; ++i)
      longest = std::max(longest, samples[i].size(0));
    torch::Tensor batch = torch::zeros({static_cast<int64_t>(end - first), longest}, torch::kLong);
    for (size_t i = first; i < end; ++i)
      batch[static_cast<int64_t>(i - first)].narrow(0, 0, samples[i].size(0)).copy_(samples[i]);
    batches.push_back(batch);
  }
  return batches;
}

// The long tail first: the samples worst-first (longest first), so the first batches of a
// short smoke test hold the longest samples the data has. With a card (OOMGUARD_CARD=t4) the
// training steps are also searched in other orders, and the phase must fit in every one found;
// step(i) takes batch i alone, as that search needs.
TEST_F(CharLMTest, LongTailFirst) {
  CharLM model;
  model->to(oomguard::testing::device());
  const std::vector<torch::Tensor> samples = long_tail_samples(128);
  const std::vector<torch::Tensor> batches = padded_batches(oomguard::testing::worst_first(
      samples, [](const torch::Tensor& sample) { return sample.size(0); }));
  EXPECT_EQ(batches.front().size(1), 4 * kContext + 1) << "the longest samples come first";

  torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(1e-3));
  model->train();
  std::vector<torch::Tensor> kept;
  // The batch holding every long sample first, then shorter ones.
  const auto training = oomguard::testing::measure_steps("train", 6, [&](int step) {
    train_step(model, optimizer, batches[static_cast<size_t>(step)], kept);
  });
  EXPECT_PHASE_NO_STEP_GROWTH(training, "16KiB");
  if (!training.predictions.empty())  // a card to fit: OOMGUARD_CARD or OOMGUARD_CAPACITY
    EXPECT_PHASE_FITS_CARD_IN_ANY_ORDER(training, "10%");
}

}  // namespace
