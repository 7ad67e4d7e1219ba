#include <oomguard/models/kv_cache.h>

#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

namespace oomguard::models {

KVCache::KVCache(
    int64_t layers,
    int64_t batch,
    int64_t heads,
    int64_t capacity,
    int64_t head_dim,
    CacheMode mode,
    at::TensorOptions options)
    : keys_(static_cast<size_t>(layers)),
      values_(static_cast<size_t>(layers)),
      capacity_(capacity),
      mode_(mode) {
  TORCH_CHECK(capacity > 0, "KVCache: capacity must be positive, got ", capacity);
  TORCH_CHECK(mode != CacheMode::kNone, "KVCache: kNone means decoding without a cache");
  if (mode_ == CacheMode::kStatic) {
    for (size_t l = 0; l < keys_.size(); ++l) {
      keys_[l] = at::empty({batch, heads, capacity, head_dim}, options);
      values_[l] = at::empty({batch, heads, capacity, head_dim}, options);
    }
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
  if (mode_ == CacheMode::kGrow) {
    // The old tensors are freed only after the new ones exist: each step briefly holds both.
    keys = keys.defined() ? at::cat({keys, k}, 2) : k.contiguous();
    values = values.defined() ? at::cat({values, v}, 2) : v.contiguous();
    return {keys, values};
  }
  keys.narrow(2, length_, t).copy_(k);
  values.narrow(2, length_, t).copy_(v);
  return {keys.narrow(2, 0, length_ + t), values.narrow(2, 0, length_ + t)};
}

void KVCache::advance(int64_t t) {
  TORCH_CHECK(length_ + t <= capacity_, "KVCache: advancing past capacity");
  length_ += t;
}

int64_t KVCache::nbytes() const {
  int64_t n = 0;
  for (size_t l = 0; l < keys_.size(); ++l) {
    if (keys_[l].defined()) {
      n += static_cast<int64_t>(keys_[l].nbytes() + values_[l].nbytes());
    }
  }
  return n;
}

const void* KVCache::storage_of_layer0() const {
  return keys_.empty() || !keys_[0].defined() ? nullptr : keys_[0].data_ptr();
}

}  // namespace oomguard::models
