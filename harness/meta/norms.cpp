// Meta kernels of the normalisations (harness/meta/kernels.h).
#include "harness/meta/kernels.h"

#include <array>
#include <optional>
#include <tuple>
#include <vector>

#include <ATen/OpMathType.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/SymIntArrayRef.h>
#include <c10/util/Exception.h>

namespace oomguard::meta {
namespace {

// The statistics' dtype: float for a reduced-precision input, as the CUDA kernel keeps them
// (the CPU kernel does too where the weight is float); the input's otherwise.
at::ScalarType stat_type(const at::Tensor& input) {
  const at::ScalarType t = input.scalar_type();
  return t == at::kHalf || t == at::kBFloat16 ? at::kFloat : t;
}

// LibTorch's layer_norm_cpu: the input made contiguous, Y like it, mean and rstd of M rows
// viewed as the input's leading dimensions followed by ones.
std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm(
    const at::Tensor& input,
    c10::SymIntArrayRef normalized_shape,
    const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias,
    double /*eps*/) {
  const int64_t axis = input.dim() - static_cast<int64_t>(normalized_shape.size());
  TORCH_CHECK(axis >= 0, "native_layer_norm: normalized_shape has more dimensions than the input");
  (void)weight;
  (void)bias;
  const at::Tensor x = input.contiguous();
  at::Tensor y = at::empty_like(x, at::MemoryFormat::Contiguous);
  int64_t m = 1;
  std::vector<int64_t> stat_shape;
  for (int64_t d = 0; d < input.dim(); ++d) {
    if (d < axis)
      m *= input.size(d);
    stat_shape.push_back(d < axis ? input.size(d) : 1);
  }
  const at::TensorOptions stats = x.options().dtype(stat_type(input));
  at::Tensor mean = at::empty({m}, stats).view(stat_shape);
  at::Tensor rstd = at::empty({m}, stats).view(stat_shape);
  return {std::move(y), std::move(mean), std::move(rstd)};
}

// LibTorch's layer_norm_backward_cpu: the gradients each output_mask asks for, like the
// (contiguous) input, weight and bias; zeros for the parameters of an empty input.
std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm_backward(
    const at::Tensor& grad_out,
    const at::Tensor& input,
    c10::SymIntArrayRef /*normalized_shape*/,
    const at::Tensor& /*mean*/,
    const at::Tensor& /*rstd*/,
    const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias,
    std::array<bool, 3> output_mask) {
  const at::Tensor dy = grad_out.contiguous();
  const at::Tensor x = input.contiguous();
  const bool empty = x.numel() == 0;
  const auto param_grad = [empty](const std::optional<at::Tensor>& p) {
    if (!p.has_value() || !p->defined())
      return at::Tensor();
    const at::Tensor c = p->contiguous();
    return empty ? at::zeros_like(c, at::MemoryFormat::Contiguous)
                 : at::empty_like(c, at::MemoryFormat::Contiguous);
  };
  at::Tensor dx, dgamma, dbeta;
  if (output_mask[0])
    dx = at::empty_like(x, at::MemoryFormat::Contiguous);
  if (output_mask[1])
    dgamma = param_grad(weight);
  if (output_mask[2])
    dbeta = param_grad(bias);
  return {std::move(dx), std::move(dgamma), std::move(dbeta)};
}

// LibTorch's native_group_norm (CPU): Y like the input in its suggested memory format, mean
// and rstd of [N, group] in the parameters' dtype (float for a reduced-precision input with
// float parameters, the input's otherwise). Registered at Meta, it replaces the
// CompositeExplicitAutograd math_group_norm, which would reach var_mean.correction.
std::tuple<at::Tensor, at::Tensor, at::Tensor> native_group_norm(
    const at::Tensor& input,
    const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& /*bias*/,
    c10::SymInt n,
    c10::SymInt /*c*/,
    c10::SymInt /*hxw*/,
    int64_t group,
    double /*eps*/) {
  const bool mixed = (input.scalar_type() == at::kHalf || input.scalar_type() == at::kBFloat16) &&
                     weight.has_value() && weight->defined() && weight->scalar_type() == at::kFloat;
  const at::TensorOptions stats = input.options().dtype(mixed ? at::kFloat : input.scalar_type());
  at::Tensor y = at::empty_like(input, input.suggest_memory_format());
  const int64_t rows = n.guard_int(__FILE__, __LINE__);
  at::Tensor mean = at::empty({rows, group}, stats);
  at::Tensor rstd = at::empty({rows, group}, stats);
  return {std::move(y), std::move(mean), std::move(rstd)};
}

// LibTorch's native_group_norm_backward (CPU): the gradients each output_mask asks for (the
// input's in its suggested memory format, the parameters' contiguous), then the kernel's two
// [N, C] buffers of the accumulation type for the while.
std::tuple<at::Tensor, at::Tensor, at::Tensor> native_group_norm_backward(
    const at::Tensor& /*grad_out*/,
    const at::Tensor& input,
    const at::Tensor& /*mean*/,
    const at::Tensor& /*rstd*/,
    const std::optional<at::Tensor>& weight,
    c10::SymInt n,
    c10::SymInt c,
    c10::SymInt /*hxw*/,
    int64_t /*group*/,
    std::array<bool, 3> output_mask) {
  const bool has_weight = weight.has_value() && weight->defined();
  at::Tensor dx, dgamma, dbeta;
  if (output_mask[0])
    dx = at::empty_like(input, input.suggest_memory_format());
  if (output_mask[1] && has_weight)
    dgamma = at::empty_like(*weight, at::MemoryFormat::Contiguous);
  if (output_mask[2] && has_weight)
    dbeta = at::empty_like(*weight, at::MemoryFormat::Contiguous);
  const at::TensorOptions acc = input.options().dtype(at::toOpMathType(input.scalar_type()));
  const std::vector<int64_t> per_channel = {
      n.guard_int(__FILE__, __LINE__), c.guard_int(__FILE__, __LINE__)};
  const at::Tensor ds = at::empty(per_channel, acc), db = at::empty(per_channel, acc);
  return {std::move(dx), std::move(dgamma), std::move(dbeta)};
}

}  // namespace

void register_norms(torch::Library& aten) {
  aten.impl("native_group_norm", TORCH_FN(native_group_norm));
  aten.impl("native_group_norm_backward", TORCH_FN(native_group_norm_backward));
  aten.impl("native_layer_norm", TORCH_FN(native_layer_norm));
  aten.impl("native_layer_norm_backward", TORCH_FN(native_layer_norm_backward));
}

}  // namespace oomguard::meta
