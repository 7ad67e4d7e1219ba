// Meta kernels of the normalisations (harness/meta/kernels.h).
#include "harness/meta/kernels.h"

#include <array>
#include <optional>
#include <tuple>

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

}  // namespace

void register_norms(torch::Library& aten) {
  aten.impl("native_layer_norm", TORCH_FN(native_layer_norm));
  aten.impl("native_layer_norm_backward", TORCH_FN(native_layer_norm_backward));
}

}  // namespace oomguard::meta
