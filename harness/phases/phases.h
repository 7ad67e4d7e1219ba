#pragma once
// The three phases: free functions taking a const config and returning a result struct.
// Measurement is the caller's (PhaseScope), so each phase only does its work.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <torch/optim/adamw.h>

#include "data/loader.h"
#include "models/tiny_gpt.h"

namespace oomguard::phases {

// train.precision: fp32, or mixed precision as a card trains in it: the forward and the loss
// under CUDA autocast at fp16 (the loss scaled by oomguard::amp::GradScaler) or bf16, the
// backward and the optimizer outside it, the parameters and their gradients fp32. Where
// oomguard stands for the card (CPU, Meta) the autocast is emulated
// (<oomguard/amp/cuda_autocast.h>).
enum class Precision { kFp32, kFp16Amp, kBf16Amp };
// "fp32", "fp16-amp", "bf16-amp"; the names parse_precision() takes.
const char* precision_name(Precision precision);
// The Precision named `name`, nullopt for any other name.
std::optional<Precision> parse_precision(const std::string& name);

struct TrainConfig {
  int64_t steps = 30;
  double lr = 3e-3;
  double weight_decay = 0.01;
  double grad_clip = 1.0;
  Precision precision = Precision::kFp32;
};
struct TrainResult {
  std::vector<double> losses;  // one per step
  int64_t longest_batch = 0;   // the largest T of any batch
};
// AdamW steps with gradient clipping; `optimizer` is the caller's, its state outlives the phase.
TrainResult train(
    models::TinyGPT& model,
    torch::optim::AdamW& optimizer,
    data::Loader& loader,
    const TrainConfig& config);

struct EvaluateConfig {
  int64_t batches = 8;
  // The `no_grad_eval` guard. Off: train mode (dropout on), autograd recording, and every
  // batch's logits kept in a list until the loop ends, each holding its graph alive.
  bool no_grad = true;
  // Sees each batch's logits [B, T, V] as soon as they exist (tests inspect grad mode here).
  std::function<void(const at::Tensor& logits)> on_batch;
};
struct EvaluateResult {
  double loss = 0.0;  // mean token cross-entropy
  int64_t steps = 0;
  int64_t longest_batch = 0;  // the largest T of any batch
};
// Guarded evaluation: NoGradGuard + eval(), each batch reduced to a scalar at once.
// Leaves the model in train mode.
EvaluateResult evaluate(models::TinyGPT& model, data::Loader& loader, const EvaluateConfig& config);

struct GenerateConfig {
  int64_t prompts = 4;
  int64_t prompt_length = 32;
  int64_t max_new_tokens = 64;
  bool greedy = true;
  double temperature = 1.0;
  // generate.stop_at_eos: stop once every prompt has drawn the end-of-sample token. When that
  // is depends on the tokens drawn: on the Meta device (no tokens) the phase is refused.
  bool stop_at_eos = false;
  uint64_t seed = 0;
  // The `max_new_tokens` guard. Off: each prompt goes on until its source sample would end,
  // so a long-tail sample generates long, bounded only by the model's max_seq_len.
  bool cap_new_tokens = true;
  // generate.cache: a static cache sized once (the `kv_cap` guard), torch::cat growth
  // (kGrow, what the guard switched off does) or no cache, the whole context run every step.
  models::CacheMode cache = models::CacheMode::kStatic;
};
struct GenerateResult {
  int64_t tokens_generated = 0;
  int64_t max_sequence_length = 0;
  int64_t steps = 0;
  int64_t cache_capacity = 0;          // positions the KV cache may hold
  int64_t cache_bytes = 0;             // what the KV cache held at the end
  std::vector<int64_t> sample_tokens;  // the tokens generated for the first prompt
};
// The samples generate's prompts are cut from: the first config.prompts samples holding at
// least config.prompt_length bytes (fewer when the samples run out).
std::vector<const std::string*> prompt_sources(
    const std::vector<std::string>& samples, const GenerateConfig& config);

// Batched decoding with a KV cache (or none) of prompt_length + max_new_tokens positions.
// Prompts are the first prompt_length bytes of `samples` long enough to give them.
GenerateResult generate(
    models::TinyGPT& model, const std::vector<std::string>& samples, const GenerateConfig& config);

}  // namespace oomguard::phases
