// Meta kernels of indexing (harness/meta/kernels.h).
#include "harness/meta/kernels.h"

#include <utility>
#include <vector>

#include <ATen/ExpandUtils.h>
#include <ATen/core/Tensor.h>
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

}  // namespace

void register_indexing(torch::Library& aten) {
  aten.impl("index_select", TORCH_FN(index_select));
  aten.impl("embedding_dense_backward", TORCH_FN(embedding_dense_backward));
  aten.impl("where.self", TORCH_FN(where));
  aten.impl("where.self_out", TORCH_FN(where_out));
}

}  // namespace oomguard::meta
