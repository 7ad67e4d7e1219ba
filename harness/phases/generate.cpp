#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/argmax.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/multinomial.h>
#include <ATen/ops/softmax.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/grad_mode.h>

#include "data/tokenizer.h"
#include "harness/phases/phases.h"

namespace oomguard::phases {
namespace {

// [B, P] int64 prompts: the first P tokens of samples long enough to give them.
at::Tensor make_prompts(const std::vector<std::string>& samples, const GenerateConfig& config) {
  std::vector<int64_t> ids;
  int64_t found = 0;
  for (const auto& sample : samples) {
    if (found == config.prompts) {
      break;
    }
    if (static_cast<int64_t>(sample.size()) >= config.prompt_length) {
      const auto tokens = data::encode(sample);
      ids.insert(ids.end(), tokens.begin(), tokens.begin() + config.prompt_length);
      ++found;
    }
  }
  TORCH_CHECK(
      found == config.prompts,
      "generate: only ",
      found,
      " samples hold ",
      config.prompt_length,
      " bytes for ",
      config.prompts,
      " prompts; hint: lower generate.prompt_length or generate.prompts");
  return at::from_blob(ids.data(), {found, config.prompt_length}, at::kLong).clone();
}

}  // namespace

GenerateResult generate(
    models::TinyGPT& model, const std::vector<std::string>& samples, const GenerateConfig& config) {
  torch::NoGradGuard no_grad;
  model->eval();
  at::Tensor prompts = make_prompts(samples, config);  // [B, P]
  const int64_t B = prompts.size(0);
  models::KVCache cache = model->make_cache(B, config.prompt_length + config.max_new_tokens);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(config.seed);

  GenerateResult result;
  at::Tensor logits = model->forward(prompts, cache);  // [B, P, V]
  for (int64_t i = 0; i < config.max_new_tokens; ++i) {
    at::Tensor last = logits.select(1, -1);  // [B, V]
    at::Tensor next = config.greedy ? last.argmax(-1, /*keepdim=*/true)
                                    : at::multinomial(
                                          at::softmax(last / config.temperature, -1),
                                          1,
                                          /*replacement=*/false,
                                          gen);  // [B, 1]
    result.sample_tokens.push_back(next[0][0].item<int64_t>());
    result.tokens_generated += B;
    ++result.steps;
    if (i + 1 < config.max_new_tokens) {
      logits = model->forward(next, cache);
    }
  }
  result.max_sequence_length = cache.length() + 1;
  model->train();
  return result;
}

}  // namespace oomguard::phases
