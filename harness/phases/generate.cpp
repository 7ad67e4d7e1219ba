#include <algorithm>

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

struct Prompts {
  at::Tensor ids;              // [B, P] int64
  int64_t longest_source = 0;  // tokens of the longest sample a prompt was cut from
};

// The first P tokens of the first B samples long enough to give them.
Prompts make_prompts(const std::vector<std::string>& samples, const GenerateConfig& config) {
  std::vector<int64_t> ids;
  Prompts prompts;
  int64_t found = 0;
  for (const auto& sample : samples) {
    if (found == config.prompts) {
      break;
    }
    if (static_cast<int64_t>(sample.size()) >= config.prompt_length) {
      const auto tokens = data::encode(sample);
      ids.insert(ids.end(), tokens.begin(), tokens.begin() + config.prompt_length);
      prompts.longest_source =
          std::max(prompts.longest_source, static_cast<int64_t>(tokens.size()));
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
  prompts.ids = at::from_blob(ids.data(), {found, config.prompt_length}, at::kLong).clone();
  return prompts;
}

}  // namespace

GenerateResult generate(
    models::TinyGPT& model, const std::vector<std::string>& samples, const GenerateConfig& config) {
  torch::NoGradGuard no_grad;
  model->eval();
  const Prompts prompts = make_prompts(samples, config);
  const int64_t B = prompts.ids.size(0), P = config.prompt_length;
  // Guarded: a hard cap. Unguarded: until the longest source sample would end, as far as the
  // position embedding reaches.
  const int64_t new_tokens =
      config.cap_new_tokens
          ? config.max_new_tokens
          : std::clamp(prompts.longest_source - P, int64_t{1}, model->config().max_seq_len - P);
  models::KVCache cache = model->make_cache(B, P + new_tokens, config.cache);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(config.seed);

  GenerateResult result;
  result.cache_capacity = cache.capacity();
  at::Tensor logits = model->forward(prompts.ids, cache);  // [B, P, V]
  for (int64_t i = 0; i < new_tokens; ++i) {
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
    if (i + 1 < new_tokens) {
      logits = model->forward(next, cache);
    }
  }
  result.max_sequence_length = cache.length() + 1;
  result.cache_bytes = cache.nbytes();
  model->train();
  return result;
}

}  // namespace oomguard::phases
