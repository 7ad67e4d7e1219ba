// Meta kernels of a convolutional network (harness/meta/kernels.h): convolution (transposed
// too) and its backward, batch norm and its backward, log-sigmoid and its backward.
#include "harness/meta/kernels.h"

#include <array>
#include <optional>
#include <tuple>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/core/SymIntArrayRef.h>
#include <c10/util/Exception.h>

namespace oomguard::meta {
namespace {

// The parameter of spatial dimension `d` (a single value applies to all).
int64_t at_dim(const std::vector<int64_t>& values, size_t d, int64_t none) {
  if (values.empty())
    return none;
  return values.size() == 1 ? values[0] : values.at(d);
}

// The output's sizes: batch, channels, then each spatial size by the convolution's arithmetic
// (transposed: the gradient of a convolution's).
std::vector<int64_t> conv_output_sizes(
    const at::Tensor& input,
    const at::Tensor& weight,
    const std::vector<int64_t>& stride,
    const std::vector<int64_t>& padding,
    const std::vector<int64_t>& dilation,
    bool transposed,
    const std::vector<int64_t>& output_padding,
    int64_t groups) {
  TORCH_CHECK(
      input.dim() == weight.dim() && input.dim() >= 3,
      "convolution: expected a batched input with as many dimensions as the weight (",
      weight.dim(),
      "), got ",
      input.dim());
  std::vector<int64_t> sizes = {
      input.size(0), transposed ? weight.size(1) * groups : weight.size(0)};
  for (int64_t d = 2; d < input.dim(); ++d) {
    const auto k = static_cast<size_t>(d - 2);
    const int64_t s = at_dim(stride, k, 1), p = at_dim(padding, k, 0), dil = at_dim(dilation, k, 1),
                  kernel = weight.size(d);
    const int64_t out = transposed ? (input.size(d) - 1) * s - 2 * p + dil * (kernel - 1) +
                                         at_dim(output_padding, k, 0) + 1
                                   : (input.size(d) + 2 * p - dil * (kernel - 1) - 1) / s + 1;
    TORCH_CHECK(out > 0, "convolution: the output would have no positions along dimension ", d);
    sizes.push_back(out);
  }
  return sizes;
}

// The memory format LibTorch's convolutions give their outputs and gradients: channels last
// where the input or the weight is, else contiguous.
at::MemoryFormat conv_format(const at::Tensor& input, const at::Tensor& weight) {
  for (const at::Tensor* t : {&input, &weight}) {
    const at::MemoryFormat f = t->suggest_memory_format();
    if (f == at::MemoryFormat::ChannelsLast || f == at::MemoryFormat::ChannelsLast3d)
      return f;
  }
  return at::MemoryFormat::Contiguous;
}

// LibTorch's convolution: one output, in conv_format.
at::Tensor convolution(
    const at::Tensor& input,
    const at::Tensor& weight,
    const std::optional<at::Tensor>& /*bias*/,
    c10::SymIntArrayRef stride,
    c10::SymIntArrayRef padding,
    c10::SymIntArrayRef dilation,
    bool transposed,
    c10::SymIntArrayRef output_padding,
    c10::SymInt groups) {
  const std::vector<int64_t> sizes = conv_output_sizes(
      input,
      weight,
      concrete(stride),
      concrete(padding),
      concrete(dilation),
      transposed,
      concrete(output_padding),
      groups.guard_int(__FILE__, __LINE__));
  return at::empty(sizes, input.options().memory_format(conv_format(input, weight)));
}

// Its backward: each gradient output_mask asks for, like the input, the weight and the bias.
std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward(
    const at::Tensor& /*grad_output*/,
    const at::Tensor& input,
    const at::Tensor& weight,
    at::OptionalSymIntArrayRef bias_sizes,
    c10::SymIntArrayRef /*stride*/,
    c10::SymIntArrayRef /*padding*/,
    c10::SymIntArrayRef /*dilation*/,
    bool /*transposed*/,
    c10::SymIntArrayRef /*output_padding*/,
    c10::SymInt /*groups*/,
    std::array<bool, 3> output_mask) {
  const at::MemoryFormat format = conv_format(input, weight);
  at::Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0])
    grad_input = at::empty_like(input, format);
  if (output_mask[1])
    grad_weight = at::empty_like(weight, format);
  if (output_mask[2] && bias_sizes.has_value())
    grad_bias = at::empty(concrete(*bias_sizes), weight.options());
  return {std::move(grad_input), std::move(grad_weight), std::move(grad_bias)};
}

// LibTorch's batch_norm_cpu: the output like the input; in training the saved mean and
// inverse deviation per channel, otherwise empty.
std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm(
    const at::Tensor& input,
    const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& /*bias*/,
    const std::optional<at::Tensor>& /*running_mean*/,
    const std::optional<at::Tensor>& /*running_var*/,
    bool training,
    double /*momentum*/,
    double /*eps*/) {
  TORCH_CHECK(input.dim() >= 2, "batch_norm: expected at least 2 dimensions, got ", input.dim());
  at::Tensor out = at::empty_like(input, input.suggest_memory_format());
  const at::TensorOptions stats =
      weight.has_value() && weight->defined() ? weight->options() : input.options();
  const int64_t channels = training ? input.size(1) : 0;
  return {std::move(out), at::empty({channels}, stats), at::empty({channels}, stats)};
}

// Its backward: the gradients output_mask asks for, like the input and per channel.
std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm_backward(
    const at::Tensor& /*grad_out*/,
    const at::Tensor& input,
    const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& /*running_mean*/,
    const std::optional<at::Tensor>& /*running_var*/,
    const std::optional<at::Tensor>& /*save_mean*/,
    const std::optional<at::Tensor>& /*save_invstd*/,
    bool /*train*/,
    double /*eps*/,
    std::array<bool, 3> output_mask) {
  const at::TensorOptions per_channel =
      weight.has_value() && weight->defined() ? weight->options() : input.options();
  at::Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0])
    grad_input = at::empty_like(input, input.suggest_memory_format());
  if (output_mask[1])
    grad_weight = at::empty({input.size(1)}, per_channel);
  if (output_mask[2])
    grad_bias = at::empty({input.size(1)}, per_channel);
  return {std::move(grad_input), std::move(grad_weight), std::move(grad_bias)};
}

// LibTorch's log_sigmoid_forward_cpu: the output and a buffer, each like the input.
std::tuple<at::Tensor, at::Tensor> log_sigmoid_forward(const at::Tensor& self) {
  return {at::empty_like(self), at::empty_like(self)};
}

at::Tensor log_sigmoid_backward(
    const at::Tensor& /*grad_output*/, const at::Tensor& self, const at::Tensor& /*buffer*/) {
  return at::empty_like(self);
}

}  // namespace

void register_convolution(torch::Library& aten) {
  aten.impl("convolution", TORCH_FN(convolution));
  aten.impl("convolution_backward", TORCH_FN(convolution_backward));
  aten.impl("native_batch_norm", TORCH_FN(native_batch_norm));
  aten.impl("native_batch_norm_backward", TORCH_FN(native_batch_norm_backward));
  aten.impl("log_sigmoid_forward", TORCH_FN(log_sigmoid_forward));
  aten.impl("log_sigmoid_backward", TORCH_FN(log_sigmoid_backward));
}

}  // namespace oomguard::meta
