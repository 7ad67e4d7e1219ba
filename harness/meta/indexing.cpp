// Meta kernels of indexing (harness/meta/kernels.h).
#include "harness/meta/kernels.h"

#include <utility>
#include <vector>

#include <ATen/ExpandUtils.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/_embedding_bag_dense_backward.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/zeros.h>
#include <c10/core/SymInt.h>
#include <c10/util/Exception.h>

namespace oomguard::meta {
namespace {

// LibTorch's index_select_cpu_: the input's sizes with `dim` as long as the index, contiguous.
at::Tensor index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
  TORCH_CHECK(
      index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
      "index_select(): Expected dtype int32 or int64 for index");
  if (self.dim() == 0)
    return at::empty({}, self.options());
  dim = c10::maybe_wrap_dim(dim, self.dim());
  std::vector<int64_t> sizes = self.sizes().vec();
  sizes[static_cast<size_t>(dim)] = index.numel();
  return at::empty(sizes, self.options());
}

// LibTorch's embedding_dense_backward_cpu: the weight's gradient, zeros of
// [num_weights, embedding dim].
at::Tensor embedding_dense_backward(
    const at::Tensor& grad_output,
    const at::Tensor& indices,
    c10::SymInt num_weights,
    c10::SymInt /*padding_idx*/,
    bool /*scale_grad_by_freq*/) {
  TORCH_CHECK(
      indices.scalar_type() == at::kLong || indices.scalar_type() == at::kInt,
      "embedding_backward: indices must be int32 or int64");
  return at::zeros(
      {num_weights.guard_int(__FILE__, __LINE__), grad_output.size(-1)}, grad_output.options());
}

// LibTorch's where: the three shapes broadcast, the promoted dtype of self and other.
std::pair<std::vector<int64_t>, at::ScalarType> where_result(
    const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(
      condition.scalar_type() == at::kBool || condition.scalar_type() == at::kByte,
      "where expected condition to be a boolean tensor, but got a tensor with dtype ",
      condition.scalar_type());
  return {
      at::infer_size(at::infer_size(condition.sizes(), self.sizes()), other.sizes()),
      at::result_type(self, other)};
}

at::Tensor where(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other) {
  const auto [shape, dtype] = where_result(condition, self, other);
  return at::empty(shape, self.options().dtype(dtype));
}

// where.self_out (SDPA's _safe_softmax calls it): `out` resized to where's shape, as
// LibTorch's resize_output does.
at::Tensor& where_out(
    const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  const auto [shape, dtype] = where_result(condition, self, other);
  TORCH_CHECK(
      out.scalar_type() == dtype, "where: expected out to be ", dtype, ", got ", out.scalar_type());
  if (out.sizes() != c10::IntArrayRef(shape))
    out.resize_(shape);
  return out;
}

// Embedding bags (LibTorch's EmbeddingBag.cpp, CPU), of N indices in B offsets (nb bags, one
// fewer with include_last_offset) of a [V, D] weight; modes 0 sum, 1 mean, 2 max.
constexpr int64_t kSum = 0, kMean = 1, kMax = 2;

// The index dtype both indices and offsets take, and their copies where one is narrower.
std::pair<at::Tensor, at::Tensor> promoted(const at::Tensor& indices, const at::Tensor& offsets) {
  const at::ScalarType common = at::promoteTypes(indices.scalar_type(), offsets.scalar_type());
  return {
      indices.scalar_type() == common ? indices : indices.to(common),
      offsets.scalar_type() == common ? offsets : offsets.to(common)};
}

// make_offset2bag: [N + 1] zeros, the bags' starts added (ones of [nb]), the cumulative sum in
// a new [N + 1] (the first freed), resized to [N]: its storage keeps N + 1.
at::Tensor offset2bag_of(const at::Tensor& offsets, int64_t n, int64_t bags) {
  at::Tensor starts = at::zeros({n + 1}, offsets.options());
  { const at::Tensor ones = at::empty({bags}, offsets.options()); }
  at::Tensor bag = at::empty({n + 1}, offsets.options());
  starts.reset();
  bag.resize_({n});
  return bag;
}

bool sum_fast_path(
    const at::Tensor& weight, const std::optional<at::Tensor>& per_sample, int64_t padding_idx) {
  const at::ScalarType t = weight.scalar_type();
  return (t == at::kFloat || t == at::kHalf || t == at::kBFloat16) && weight.stride(1) == 1 &&
         padding_idx < 0 &&
         (!per_sample.has_value() || !per_sample->defined() || per_sample->stride(0) == 1);
}

// _embedding_bag_cpu_impl: output [nb, D]; offset2bag (empty on the sum fast path); bag_size
// [nb] in a storage of B (of B unresized when the bags need no sizes); max_indices, [nb, D]
// for max (grown from [nb]), else like bag_size; the mean's clamped sizes for the while.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> embedding_bag_impl(
    const at::Tensor& weight,
    const at::Tensor& indices_in,
    const at::Tensor& offsets_in,
    int64_t mode,
    const std::optional<at::Tensor>& per_sample_weights,
    bool include_last_offset,
    int64_t padding_idx,
    bool requires_grad) {
  TORCH_CHECK(weight.dim() == 2, "embedding_bag: weight has to be a 2D Tensor");
  TORCH_CHECK(
      indices_in.dim() == 1 && offsets_in.dim() == 1,
      "embedding_bag: input and offsets have to be 1D Tensors");
  const auto [indices, offsets] = promoted(indices_in, offsets_in);
  const int64_t n = indices.numel(), b = offsets.size(0), d = weight.size(1);
  const int64_t bags = include_last_offset ? b - 1 : b;
  at::Tensor output = at::empty({bags, d}, weight.options());
  at::Tensor offset2bag = at::empty({0}, offsets.options());
  if (mode == kMean || mode == kMax || !sum_fast_path(weight, per_sample_weights, padding_idx))
    offset2bag = offset2bag_of(offsets, n, bags);
  at::Tensor bag_size = at::empty(offsets.sizes(), offsets.options());
  if (requires_grad || mode == kMean || mode == kMax) {
    bag_size.resize_({bags});
    if (bags > 1)
      const at::Tensor differences = at::empty({bags - 1}, offsets.options());
  }
  at::Tensor max_indices = at::empty(bag_size.sizes(), offsets.options());
  if (mode == kMax)
    max_indices.resize_({bags, d});
  if (mode == kMean) {
    const at::Tensor clamped = at::empty({bags}, offsets.options());
    const at::Tensor divisor = at::empty({bags}, output.options());
  }
  return {output, offset2bag, bag_size, max_indices};
}

// _embedding_bag (the weight needs a gradient) and _embedding_bag_forward_only.
template <bool kRequiresGrad>
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> embedding_bag(
    const at::Tensor& weight,
    const at::Tensor& indices,
    const at::Tensor& offsets,
    bool /*scale_grad_by_freq*/,
    int64_t mode,
    bool /*sparse*/,
    const std::optional<at::Tensor>& per_sample_weights,
    bool include_last_offset,
    int64_t padding_idx) {
  return embedding_bag_impl(
      weight,
      indices,
      offsets,
      mode,
      per_sample_weights,
      include_last_offset,
      padding_idx,
      kRequiresGrad);
}

// _embedding_bag_backward: offset2bag made again for the while where the forward's sum fast
// path left it empty, then the dense backward (sparse gradients are refused on Meta).
at::Tensor embedding_bag_backward(
    const at::Tensor& grad,
    const at::Tensor& indices_in,
    const at::Tensor& offsets_in,
    const at::Tensor& offset2bag,
    const at::Tensor& bag_size,
    const at::Tensor& maximum_indices,
    c10::SymInt num_weights,
    bool scale_grad_by_freq,
    int64_t mode,
    bool sparse,
    const std::optional<at::Tensor>& per_sample_weights,
    int64_t padding_idx) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      !sparse,
      "aten::_embedding_bag_backward: sparse gradients are not "
      "supported on the Meta device");
  const auto [indices, offsets] = promoted(indices_in, offsets_in);
  at::Tensor bag = offset2bag;
  if (indices.numel() != 0 && offset2bag.numel() == 0)
    bag = offset2bag_of(offsets, indices.numel(), offsets.size(0));
  return at::_embedding_bag_dense_backward_symint(
      grad,
      indices,
      bag,
      bag_size,
      maximum_indices,
      std::move(num_weights),
      scale_grad_by_freq,
      mode,
      per_sample_weights,
      padding_idx);
}

// _embedding_bag_dense_backward_cpu: the incoming gradient made contiguous, the weight's
// gradient zeros of [V, D]; sum and mean sort the indices ([N] values, [N] int64 order and
// the sort's [N] int64 arange) and gather offset2bag (and per-sample weights) in that order;
// max gathers the non-empty bags' maxima, all nb bags taken as non-empty (their count is a
// value: an upper bound, equal to the CPU's when no bag is empty).
at::Tensor embedding_bag_dense_backward(
    const at::Tensor& grad_in,
    const at::Tensor& indices,
    const at::Tensor& offset2bag,
    const at::Tensor& bag_size,
    const at::Tensor& maximum_indices,
    c10::SymInt num_weights,
    bool /*scale_grad_by_freq*/,
    int64_t mode,
    const std::optional<at::Tensor>& per_sample_weights,
    int64_t /*padding_idx*/) {
  const at::Tensor grad = grad_in.contiguous();
  const int64_t v = num_weights.guard_int(__FILE__, __LINE__), d = grad.size(1);
  at::Tensor result = at::zeros({v, d}, grad.options());
  if (mode == kMax) {
    const int64_t k = bag_size.numel();
    at::Tensor nonzero = at::empty({k, 1}, bag_size.options().dtype(at::kLong));
    const at::Tensor maxima = at::empty({k, d}, maximum_indices.options());
    nonzero = at::empty({k, 1}, bag_size.options().dtype(at::kLong));
    const at::Tensor grads = at::empty({k, d}, grad.options());
    nonzero.reset();
    const at::Tensor column = at::empty({k}, maximum_indices.options());
    return result;
  }
  const int64_t n = indices.numel();
  const at::Tensor order = at::empty({n}, indices.options().dtype(at::kLong));
  const at::Tensor values = at::empty({n}, indices.options());
  { const at::Tensor arange = at::empty({n}, indices.options().dtype(at::kLong)); }
  const at::Tensor bags = at::empty({n}, offset2bag.options());
  at::Tensor weights;
  if (per_sample_weights.has_value() && per_sample_weights->defined())
    weights = at::empty({n}, per_sample_weights->options());
  return result;
}

// _embedding_bag_per_sample_weights_backward_cpu: zeros of [N]; offset2bag made again for the
// while where the forward left it empty.
at::Tensor embedding_bag_per_sample_weights_backward(
    const at::Tensor& grad,
    const at::Tensor& /*weight*/,
    const at::Tensor& indices_in,
    const at::Tensor& offsets_in,
    const at::Tensor& offset2bag,
    int64_t /*mode*/,
    int64_t /*padding_idx*/) {
  const auto [indices, offsets] = promoted(indices_in, offsets_in);
  at::Tensor output = at::zeros({indices.numel()}, grad.options());
  if (offset2bag.numel() == 0)
    const at::Tensor bag = offset2bag_of(offsets, indices.numel(), offsets.size(0));
  return output;
}

}  // namespace

void register_indexing(torch::Library& aten) {
  aten.impl("_embedding_bag", TORCH_FN(embedding_bag<true>));
  aten.impl("_embedding_bag_forward_only", TORCH_FN(embedding_bag<false>));
  aten.impl("_embedding_bag_backward", TORCH_FN(embedding_bag_backward));
  aten.impl("_embedding_bag_dense_backward", TORCH_FN(embedding_bag_dense_backward));
  aten.impl(
      "_embedding_bag_per_sample_weights_backward",
      TORCH_FN(embedding_bag_per_sample_weights_backward));
  aten.impl("index_select", TORCH_FN(index_select));
  aten.impl("embedding_dense_backward", TORCH_FN(embedding_dense_backward));
  aten.impl("where.self", TORCH_FN(where));
  aten.impl("where.self_out", TORCH_FN(where_out));
}

}  // namespace oomguard::meta
