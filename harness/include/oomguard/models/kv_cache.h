#pragma once
// KV cache for decoding. Static: per-layer buffers allocated once and written in place.
// Grow: every append concatenates onto the previous tensors (the `kv_cap` guard switched off).
#include <cstdint>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace oomguard::models {

enum class CacheMode {
  kStatic,  // [B, H, capacity, Dh] per layer, allocated up front, never reallocated
  kGrow,    // torch::cat every step: a new, one position longer tensor per layer and step
  kNone,    // no cache: the decoder recomputes the whole context every step (the reference)
};

class KVCache {
 public:
  // `layers` layers of [B, H, capacity, Dh]. In grow mode nothing is allocated up front and
  // capacity is only the bound past which append refuses to go. kNone is not a cache mode.
  KVCache(
      int64_t layers,
      int64_t batch,
      int64_t heads,
      int64_t capacity,
      int64_t head_dim,
      CacheMode mode = CacheMode::kStatic,
      at::TensorOptions options = at::kFloat);  // dtype and device of the buffers

  // Writes k, v ([B, H, t, Dh]) of `layer` at positions [length, length + t) and returns the
  // views [B, H, length + t, Dh] of everything cached so far. Past capacity it throws.
  std::pair<at::Tensor, at::Tensor> append(int64_t layer, const at::Tensor& k, const at::Tensor& v);
  // Marks t more positions as filled; called once per forward, after every layer appended.
  void advance(int64_t t);

  int64_t length() const { return length_; }
  int64_t capacity() const { return capacity_; }
  CacheMode mode() const { return mode_; }
  // Bytes the cache's tensors hold now (static: the whole capacity from the start).
  int64_t nbytes() const;
  // Storage of layer 0's keys: the same pointer for the whole life of a static cache.
  const void* storage_of_layer0() const;

 private:
  std::vector<at::Tensor> keys_;    // per layer [B, H, capacity or length, Dh]
  std::vector<at::Tensor> values_;  // per layer [B, H, capacity or length, Dh]
  int64_t capacity_;
  CacheMode mode_;
  int64_t length_ = 0;
};

}  // namespace oomguard::models
