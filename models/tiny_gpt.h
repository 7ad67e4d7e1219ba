#pragma once
// TinyGPT: a decoder-only transformer (pre-norm blocks, tied LM head) of torch::nn modules,
// made as any torch::nn model is: on the CPU and moved with to(device), or on the Meta device
// from its shapes alone within a meta::MakeOnMeta (<oomguard/meta/meta_device.h>).
// Shapes: B batch, T time, C d_model, H heads, Dh = C / H, V vocab.
#include <cstdint>
#include <string>

#include <c10/core/Device.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include <oomguard/models/kv_cache.h>

namespace oomguard::models {

struct TinyGPTConfig {
  int64_t vocab_size = 258;
  int64_t max_seq_len = 1024;  // position-embedding rows: the longest context the model takes
  int64_t d_model = 128;
  int64_t layers = 4;
  int64_t heads = 4;
  int64_t mlp_ratio = 4;
  double dropout = 0.1;  // on the embeddings and both residual branches
  // On the attention weights. 0 by default: LibTorch's fused CPU attention (flash) has no
  // dropout, so any p > 0 takes the math path, which keeps H x T weights per token for
  // backward and makes the forward about 2.8x slower.
  double attention_dropout = 0.0;
  // Gradient checkpointing: in training with grad mode on, each block keeps only its input
  // and recomputes its activations during backward (<oomguard/models/checkpoint.h>).
  bool checkpoint_blocks = false;
};

// Bytes autograd keeps per block and per token for backward when the block is not
// checkpointed, from the shapes (fp32; C = d_model, M = mlp_ratio * C, H = heads, T the
// sequence length), as LibTorch 2.x's CPU kernels keep them (checked with saved-tensor hooks):
//   norm1 input, mean, rstd   C + 2      qkv input                C
//   proj input                C          norm2 input, mean, rstd  C + 2
//   fc input                  C          gelu input, out input    2M
//   attention, flash kernel (attention_dropout 0): the qkv output 3C, log-sum-exp H
//     (its output is the proj input); math path (attention_dropout > 0): q, k, v 3C and
//     3 H x T (softmax, dropout noise, dropped weights)
//   residual dropout (dropout > 0): two noise tensors 2C
// Checkpointed, a block keeps its input alone: 4C bytes per token.
int64_t block_saved_bytes_per_token(const TinyGPTConfig& config, int64_t T);

class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  explicit CausalSelfAttentionImpl(const TinyGPTConfig& config);
  // x [B, T, C] -> [B, T, C]. With a cache, attends to the cached positions too.
  torch::Tensor forward(const torch::Tensor& x, KVCache* cache = nullptr, int64_t layer = 0);

 private:
  int64_t heads_;
  double dropout_;
  torch::nn::Linear qkv_{nullptr};
  torch::nn::Linear proj_{nullptr};
};
TORCH_MODULE(CausalSelfAttention);

class BlockImpl : public torch::nn::Module {
 public:
  // `index`: the block's place in the model, which names its allocations ("block2.attn").
  BlockImpl(const TinyGPTConfig& config, int64_t index);
  torch::Tensor forward(const torch::Tensor& x, KVCache* cache = nullptr, int64_t layer = 0);

 private:
  std::string attn_tag_, mlp_tag_;
  torch::nn::LayerNorm norm1_{nullptr};
  torch::nn::LayerNorm norm2_{nullptr};
  CausalSelfAttention attn_{nullptr};
  torch::nn::Linear fc_{nullptr};
  torch::nn::Linear out_{nullptr};
  torch::nn::Dropout drop_{nullptr};
};
TORCH_MODULE(Block);

class TinyGPTImpl : public torch::nn::Module {
 public:
  // Its parameters are made where torch::nn makes them: on the CPU, or on Meta within a
  // meta::MakeOnMeta. Throws c10::Error when heads do not divide d_model.
  explicit TinyGPTImpl(const TinyGPTConfig& config);
  // ids [B, T] -> logits [B, T, V].
  torch::Tensor forward(const torch::Tensor& ids);
  // Decode path: ids [B, t] are the next t positions after cache.length(); logits [B, t, V].
  torch::Tensor forward(const torch::Tensor& ids, KVCache& cache);
  // Logits [B, V] of the last position only: what generation needs, without the LM head on
  // every position. `cache` may be null (the whole context is in ids).
  torch::Tensor last_logits(const torch::Tensor& ids, KVCache* cache);
  // A cache of `capacity` positions for a batch of `batch`, shaped for this model.
  KVCache make_cache(int64_t batch, int64_t capacity, CacheMode mode = CacheMode::kStatic) const;

  const TinyGPTConfig& config() const { return config_; }
  // Where the parameters live: inputs go there.
  c10::Device device() const;

 private:
  torch::Tensor run(const torch::Tensor& ids, KVCache* cache, bool last_only);

  TinyGPTConfig config_;
  torch::nn::Embedding tok_{nullptr};
  torch::nn::Embedding pos_{nullptr};
  torch::nn::Dropout drop_{nullptr};
  torch::nn::ModuleList blocks_{nullptr};
  torch::nn::LayerNorm norm_{nullptr};
};
TORCH_MODULE(TinyGPT);

}  // namespace oomguard::models
