#include <algorithm>
#include <optional>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/argmax.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/multinomial.h>
#include <ATen/ops/softmax.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/grad_mode.h>

#include "data/tokenizer.h"
#include "harness/interrupt.h"
#include <oomguard/memory/alloc_site.h>
#include "harness/phases/phases.h"
#include <oomguard/meta/meta_device.h>

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
  const auto sources = prompt_sources(samples, config);
  const auto found = static_cast<int64_t>(sources.size());
  for (const std::string* sample : sources) {
    const auto tokens = data::encode(*sample);
    ids.insert(ids.end(), tokens.begin(), tokens.begin() + config.prompt_length);
    prompts.longest_source = std::max(prompts.longest_source, static_cast<int64_t>(tokens.size()));
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

// Logits of the last position for the next tokens: through the KV cache, or, with
// CacheMode::kNone, by running the whole context again (the reference the caches must match).
class Decoder {
 public:
  Decoder(models::TinyGPT& model, int64_t batch, int64_t capacity, models::CacheMode mode)
      : model_(model), capacity_(capacity) {
    if (mode != models::CacheMode::kNone) {
      cache_.emplace(model->make_cache(batch, capacity, mode));
    }
  }

  // ids [B, t]: the next t tokens; returns logits [B, V] of the last of them.
  at::Tensor next(const at::Tensor& ids) {
    if (cache_) {
      return model_->last_logits(ids, &*cache_);
    }
    TORCH_CHECK(length() + ids.size(1) <= capacity_, "generate: context past capacity ", capacity_);
    context_ = context_.defined() ? at::cat({context_, ids}, 1) : ids;
    return model_->last_logits(context_, nullptr);
  }

  int64_t length() const {
    return cache_ ? cache_->length() : context_.defined() ? context_.size(1) : 0;
  }
  int64_t capacity() const { return capacity_; }
  int64_t cache_bytes() const { return cache_ ? cache_->nbytes() : 0; }

 private:
  models::TinyGPT& model_;
  int64_t capacity_;
  std::optional<models::KVCache> cache_;
  at::Tensor context_;  // [B, length] without a cache
};

// generate.stop_at_eos: whether every prompt has drawn the end-of-sample token, `next` [B, 1]
// the tokens just drawn, `ended` [B, 1] those that had before.
bool every_prompt_ended(const at::Tensor& next, at::Tensor& ended) {
  const at::Tensor drawn = next.eq(data::kEosId);
  ended = ended.defined() ? ended.logical_or(drawn) : drawn;
  if (ended.is_meta())
    meta::refuse_values(
        "aten::eq",
        "generate.stop_at_eos ends generation when every prompt has drawn the end-of-sample "
        "token, which depends on the tokens drawn");
  return ended.all().item<bool>();
}

}  // namespace

std::vector<const std::string*> prompt_sources(
    const std::vector<std::string>& samples, const GenerateConfig& config) {
  std::vector<const std::string*> sources;
  for (const auto& sample : samples) {
    if (static_cast<int64_t>(sources.size()) == config.prompts) {
      break;
    }
    if (static_cast<int64_t>(sample.size()) >= config.prompt_length) {
      sources.push_back(&sample);
    }
  }
  return sources;
}

GenerateResult generate(
    models::TinyGPT& model, const std::vector<std::string>& samples, const GenerateConfig& config) {
  torch::NoGradGuard no_grad;
  model->eval();
  Prompts prompts = make_prompts(samples, config);
  prompts.ids = prompts.ids.to(model->device());
  const int64_t B = prompts.ids.size(0), P = config.prompt_length;
  // Guarded: a hard cap. Unguarded: until the longest source sample would end, as far as the
  // position embedding reaches.
  const int64_t new_tokens =
      config.cap_new_tokens
          ? config.max_new_tokens
          : std::clamp(prompts.longest_source - P, int64_t{1}, model->config().max_seq_len - P);
  Decoder decoder(model, B, P + new_tokens, config.cache);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(config.seed);

  GenerateResult result;
  result.cache_capacity = decoder.capacity();
  at::Tensor last = decoder.next(prompts.ids);  // [B, V]
  at::Tensor ended;                             // generate.stop_at_eos: [B, 1] ended
  for (int64_t i = 0; i < new_tokens; ++i) {
    throw_if_interrupted();
    memory::set_alloc_step(i);
    // Sampling draws on the host from the seeded CPU generator, so a seed picks the same
    // tokens on every device; only the [B, V] probabilities cross. On the Meta device there
    // are no probabilities to cross: the draw's shape is made there.
    at::Tensor next;  // [B, 1]
    if (config.greedy)
      next = last.argmax(-1, /*keepdim=*/true);
    else if (last.is_meta())
      next = at::multinomial(at::softmax(last / config.temperature, -1), 1);
    else
      next = at::multinomial(
                 at::softmax(last / config.temperature, -1).to(at::kCPU),
                 1,
                 /*replacement=*/false,
                 gen)
                 .to(last.device());
    result.sample_tokens.push_back(next[0][0].item<int64_t>());
    result.tokens_generated += B;
    ++result.steps;
    if (config.stop_at_eos && every_prompt_ended(next, ended))
      break;
    if (i + 1 < new_tokens) {
      last = decoder.next(next);
    }
  }
  memory::set_alloc_step(-1);  // what follows is the phase's, no step's
  result.max_sequence_length = decoder.length() + 1;
  result.cache_bytes = decoder.cache_bytes();
  model->train();
  return result;
}

}  // namespace oomguard::phases
