#pragma once
// The three phases: free functions taking a const config and returning a result struct.
// Measurement is the caller's (PhaseScope), so each phase only does its work.
#include <cstdint>
#include <string>
#include <vector>

#include <torch/optim/adamw.h>

#include "data/loader.h"
#include "models/tiny_gpt.h"

namespace oomguard::phases {

struct TrainConfig {
  int64_t steps = 30;
  double lr = 3e-3;
  double weight_decay = 0.01;
  double grad_clip = 1.0;
};
struct TrainResult {
  std::vector<double> losses;  // one per step
};
// AdamW steps with gradient clipping; `optimizer` is the caller's, its state outlives the phase.
TrainResult train(
    models::TinyGPT& model,
    torch::optim::AdamW& optimizer,
    data::Loader& loader,
    const TrainConfig& config);

struct EvaluateConfig {
  int64_t batches = 8;
};
struct EvaluateResult {
  double loss = 0.0;  // mean token cross-entropy
  int64_t steps = 0;
};
// Guarded evaluation: NoGradGuard + eval(), each batch reduced to a scalar at once.
EvaluateResult evaluate(models::TinyGPT& model, data::Loader& loader, const EvaluateConfig& config);

struct GenerateConfig {
  int64_t prompts = 4;
  int64_t prompt_length = 32;
  int64_t max_new_tokens = 64;
  bool greedy = true;
  double temperature = 1.0;
  uint64_t seed = 0;
};
struct GenerateResult {
  int64_t tokens_generated = 0;
  int64_t max_sequence_length = 0;
  int64_t steps = 0;
  std::vector<int64_t> sample_tokens;  // the tokens generated for the first prompt
};
// Batched decoding with a fixed-capacity KV cache of prompt_length + max_new_tokens positions.
// Prompts are the first prompt_length bytes of `samples` long enough to give them.
GenerateResult generate(
    models::TinyGPT& model, const std::vector<std::string>& samples, const GenerateConfig& config);

}  // namespace oomguard::phases
