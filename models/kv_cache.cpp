#include "models/kv_cache.h"

#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

namespace oomguard::models {

KVCache::KVCache(
    int64_t layers,
    int64_t batch,
    int64_t heads,
    int64_t capacity,
    int64_t head_dim,
    at::ScalarType dtype)
    : capacity_(capacity) {
  TORCH_CHECK(capacity > 0, "KVCache: capacity must be positive, got ", capacity);
  for (int64_t l = 0; l < layers; ++l) {
    keys_.push_back(at::empty({batch, heads, capacity, head_dim}, at::TensorOptions(dtype)));
    values_.push_back(at::empty({batch, heads, capacity, head_dim}, at::TensorOptions(dtype)));
  }
}

std::pair<at::Tensor, at::Tensor> KVCache::append(
    int64_t layer, const at::Tensor& k, const at::Tensor& v) {
  const int64_t t = k.size(2);
  TORCH_CHECK(
      length_ + t <= capacity_,
      "KVCache: writing ",
      t,
      " positions at ",
      length_,
      " exceeds the capacity of ",
      capacity_,
      "; hint: size the cache as longest prompt + max_new_tokens");
  auto& keys = keys_.at(static_cast<size_t>(layer));
  auto& values = values_.at(static_cast<size_t>(layer));
  keys.narrow(2, length_, t).copy_(k);
  values.narrow(2, length_, t).copy_(v);
  return {keys.narrow(2, 0, length_ + t), values.narrow(2, 0, length_ + t)};
}

void KVCache::advance(int64_t t) {
  TORCH_CHECK(length_ + t <= capacity_, "KVCache: advancing past capacity");
  length_ += t;
}

}  // namespace oomguard::models
