#include "models/tiny_gpt.h"

#include <optional>
#include <string>

#include <ATen/ops/arange.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/scaled_dot_product_attention.h>
#include <ATen/ops/tril.h>
#include <c10/util/Exception.h>
#include <torch/nn/init.h>

#include <oomguard/memory/alloc_site.h>
#include <oomguard/models/checkpoint.h>

namespace oomguard::models {

int64_t block_saved_bytes_per_token(const TinyGPTConfig& config, int64_t T) {
  const int64_t C = config.d_model, M = config.mlp_ratio * C, H = config.heads;
  const int64_t common = (C + 2) + C + C + (C + 2) + C + 2 * M;
  const int64_t attention = config.attention_dropout > 0.0 ? 3 * C + 3 * H * T : 3 * C + H;
  const int64_t residual_dropout = config.dropout > 0.0 ? 2 * C : 0;
  return 4 * (common + attention + residual_dropout);
}

// ---------------------------------------------------------------------------------------
// Attention
// ---------------------------------------------------------------------------------------

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const TinyGPTConfig& config)
    : heads_(config.heads), dropout_(config.attention_dropout) {
  qkv_ = register_module("qkv", torch::nn::Linear(config.d_model, 3 * config.d_model));
  proj_ = register_module("proj", torch::nn::Linear(config.d_model, config.d_model));
}

torch::Tensor CausalSelfAttentionImpl::forward(
    const torch::Tensor& x, KVCache* cache, int64_t layer) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), H = heads_, Dh = C / H;
  // [B, T, 3C] -> 3 x [B, H, T, Dh]
  // unbind, not qkv[i]: its backward stacks the three gradients in one pass, where three
  // selects would each zero a full [3, B, H, T, Dh] buffer and add them up.
  const auto qkv = qkv_->forward(x).view({B, T, 3, H, Dh}).permute({2, 0, 3, 1, 4}).unbind(0);
  const at::Tensor &q = qkv[0], &k = qkv[1], &v = qkv[2];
  const double p = is_training() ? dropout_ : 0.0;
  at::Tensor y;
  if (cache == nullptr || cache->length() == 0) {
    if (cache != nullptr) {
      cache->append(layer, k, v);
    }
    y = at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, p, /*is_causal=*/true);
  } else {
    const int64_t past = cache->length();
    auto [keys, values] = cache->append(layer, k, v);
    std::optional<at::Tensor> mask;  // none for one new token: it sees every cached position
    if (T > 1) {
      // [T, past + T]: new position i sees cached positions and new positions <= i.
      mask = at::ones({T, past + T}, x.options().dtype(at::kBool)).tril(past);
    }
    y = at::scaled_dot_product_attention(q, keys, values, mask, p, /*is_causal=*/false);
  }
  // [B, H, T, Dh] -> [B, T, C]
  return proj_->forward(y.transpose(1, 2).reshape({B, T, C}));
}

// ---------------------------------------------------------------------------------------
// Block
// ---------------------------------------------------------------------------------------

BlockImpl::BlockImpl(const TinyGPTConfig& config, int64_t index)
    : attn_tag_("block" + std::to_string(index) + ".attn"),
      mlp_tag_("block" + std::to_string(index) + ".mlp") {
  const int64_t C = config.d_model;
  norm1_ = register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({C})));
  attn_ = register_module("attn", CausalSelfAttention(config));
  norm2_ = register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({C})));
  fc_ = register_module("fc", torch::nn::Linear(C, config.mlp_ratio * C));
  out_ = register_module("out", torch::nn::Linear(config.mlp_ratio * C, C));
  drop_ = register_module("drop", torch::nn::Dropout(config.dropout));
}

torch::Tensor BlockImpl::forward(const torch::Tensor& x, KVCache* cache, int64_t layer) {
  torch::Tensor h;
  {
    memory::AllocTag tag(attn_tag_.c_str());
    h = x + drop_->forward(attn_->forward(norm1_->forward(x), cache, layer));
  }
  memory::AllocTag tag(mlp_tag_.c_str());
  return h + drop_->forward(out_->forward(at::gelu(fc_->forward(norm2_->forward(h)))));
}

// ---------------------------------------------------------------------------------------
// TinyGPT
// ---------------------------------------------------------------------------------------

TinyGPTImpl::TinyGPTImpl(const TinyGPTConfig& config) : config_(config) {
  TORCH_CHECK(
      config.d_model % config.heads == 0,
      "TinyGPT: heads (",
      config.heads,
      ") must divide d_model (",
      config.d_model,
      ")");
  tok_ = register_module("tok", torch::nn::Embedding(config.vocab_size, config.d_model));
  pos_ = register_module("pos", torch::nn::Embedding(config.max_seq_len, config.d_model));
  drop_ = register_module("drop", torch::nn::Dropout(config.dropout));
  blocks_ = register_module("blocks", torch::nn::ModuleList());
  for (int64_t l = 0; l < config.layers; ++l) {
    blocks_->push_back(Block(config, l));
  }
  norm_ =
      register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({config.d_model})));
  torch::NoGradGuard no_grad;
  for (auto& p : named_parameters()) {
    if (p.key().find("weight") != std::string::npos && p.value().dim() == 2) {
      torch::nn::init::normal_(p.value(), 0.0, 0.02);
    }
  }
}

torch::Tensor TinyGPTImpl::run(const torch::Tensor& ids, KVCache* cache, bool last_only) {
  const int64_t T = ids.size(1);
  const int64_t start = cache == nullptr ? 0 : cache->length();
  TORCH_CHECK(
      start + T <= config_.max_seq_len,
      "TinyGPT: sequence of ",
      start + T,
      " positions exceeds max_seq_len ",
      config_.max_seq_len);
  std::optional<memory::AllocTag> tag(std::in_place, "embed");
  auto positions = at::arange(start, start + T, ids.options());
  auto x = drop_->forward(tok_->forward(ids) + pos_->forward(positions));  // [B, T, C]
  const bool checkpointed = config_.checkpoint_blocks && cache == nullptr && is_training();
  for (size_t l = 0; l < blocks_->size(); ++l) {
    std::shared_ptr<BlockImpl> block = blocks_->ptr<BlockImpl>(l);
    if (checkpointed) {
      x = checkpoint([block](const at::Tensor& h) { return block->forward(h); }, x);
    } else {
      x = block->forward(x, cache, static_cast<int64_t>(l));
    }
  }
  if (cache != nullptr) {
    cache->advance(T);
  }
  if (last_only) {
    x = x.select(1, T - 1);  // [B, C]
  }
  // Tied head: logits = norm(x) @ tok.weight^T, [B, T, V] (or [B, V]).
  tag.emplace("head");
  return at::linear(norm_->forward(x), tok_->weight);
}

torch::Tensor TinyGPTImpl::forward(const torch::Tensor& ids) {
  return run(ids, nullptr, /*last_only=*/false);
}

torch::Tensor TinyGPTImpl::forward(const torch::Tensor& ids, KVCache& cache) {
  return run(ids, &cache, /*last_only=*/false);
}

torch::Tensor TinyGPTImpl::last_logits(const torch::Tensor& ids, KVCache* cache) {
  return run(ids, cache, /*last_only=*/true);
}

KVCache TinyGPTImpl::make_cache(int64_t batch, int64_t capacity, CacheMode mode) const {
  return KVCache(
      config_.layers,
      batch,
      config_.heads,
      capacity,
      config_.d_model / config_.heads,
      mode,
      tok_->weight.options());  // the model's dtype, on the model's device
}

c10::Device TinyGPTImpl::device() const {
  return tok_->weight.device();
}

}  // namespace oomguard::models
