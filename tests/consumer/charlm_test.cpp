// CharLM: a character language model with its own training and evaluation loops, and a test
// holding each loop to its memory budget (budgets.json, OOMGUARD_BUDGETS).
//
// CHARLM_EVAL_BUG=1 puts a classic bug back into the evaluation loop: no NoGradGuard, and
// the logits of every batch kept for later, so each batch's activations stay alive.
// CHARLM_TRAIN_BUG=1 one into the training loop: every step's logits kept (detached, "for a
// picture later"), 384 KiB more after each step.
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

// `logits_out`, when given, receives the logits [B, T, V].
torch::Tensor next_token_loss(
    CharLM& model, const torch::Tensor& batch, torch::Tensor* logits_out = nullptr) {
  using torch::indexing::Slice;
  const torch::Tensor logits = model->forward(batch.index({Slice(), Slice(0, kContext)}));
  if (logits_out != nullptr)
    *logits_out = logits;
  return torch::nn::functional::cross_entropy(
      logits.reshape({-1, kVocab}), batch.index({Slice(), Slice(1, kContext + 1)}).reshape(-1));
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

}  // namespace
