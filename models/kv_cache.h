#pragma once
// Fixed-capacity KV cache: per-layer buffers allocated once and written in place.
#include <cstdint>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace oomguard::models {

class KVCache {
 public:
  // Buffers of shape [B, H, capacity, Dh] for each of `layers` layers.
  KVCache(
      int64_t layers,
      int64_t batch,
      int64_t heads,
      int64_t capacity,
      int64_t head_dim,
      at::ScalarType dtype = at::kFloat);

  // Writes k, v ([B, H, t, Dh]) of `layer` at positions [length, length + t) and returns the
  // views [B, H, length + t, Dh] of everything cached so far. Past capacity it throws.
  std::pair<at::Tensor, at::Tensor> append(int64_t layer, const at::Tensor& k, const at::Tensor& v);
  // Marks t more positions as filled; called once per forward, after every layer appended.
  void advance(int64_t t);

  int64_t length() const { return length_; }
  int64_t capacity() const { return capacity_; }

 private:
  std::vector<at::Tensor> keys_;    // per layer [B, H, capacity, Dh]
  std::vector<at::Tensor> values_;  // per layer [B, H, capacity, Dh]
  int64_t capacity_;
  int64_t length_ = 0;
};

}  // namespace oomguard::models
