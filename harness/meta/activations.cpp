// Meta kernels of activations (harness/meta/kernels.h). Where LibTorch's CPU kernel lets a
// TensorIterator make its outputs, the same TensorIterator is built here on the Meta tensors:
// it makes the outputs with the same sizes, strides and dtype, and resizes an output given
// empty as the CPU's does (through the Meta resize_, so the growth is counted).
#include "harness/meta/kernels.h"

#include <tuple>

#include <ATen/TensorIterator.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/core/Scalar.h>
#include <c10/util/Exception.h>

namespace oomguard::meta {
namespace {

// hardtanh_cpu: an output like the input (empty_like), filled by hardtanh_out (clamp).
at::Tensor hardtanh(
    const at::Tensor& self, const c10::Scalar& /*min*/, const c10::Scalar& /*max*/) {
  return at::empty_like(self);
}

// hardtanh_backward: a binary TensorIterator of the gradient and the input makes the output.
at::Tensor hardtanh_backward(
    const at::Tensor& grad_output,
    const at::Tensor& self,
    const c10::Scalar& /*min*/,
    const c10::Scalar& /*max*/) {
  at::Tensor result;
  auto iter = at::TensorIterator::borrowing_binary_op(result, grad_output, self);
  return iter.output();
}

// _prelu_kernel: a TensorIterator of the input and the (broadcast) weight makes the output.
at::Tensor prelu_kernel(const at::Tensor& self, const at::Tensor& weight) {
  at::Tensor result;
  auto iter = at::TensorIteratorConfig()
                  .add_output(result)
                  .add_const_input(self)
                  .add_const_input(weight)
                  .build();
  return iter.output();
}

// _prelu_kernel_backward: both gradients begin empty and the TensorIterator resizes them to
// the broadcast shape (autograd then sums the weight's down to its size).
std::tuple<at::Tensor, at::Tensor> prelu_kernel_backward(
    const at::Tensor& grad_out, const at::Tensor& self, const at::Tensor& weight) {
  at::Tensor grad_self = at::empty({0}, self.options());
  at::Tensor grad_weight = at::empty({0}, weight.options());
  auto iter = at::TensorIteratorConfig()
                  .add_output(grad_self)
                  .add_output(grad_weight)
                  .add_const_input(self)
                  .add_const_input(weight)
                  .add_const_input(grad_out)
                  .build();
  return {grad_self, grad_weight};
}

// glu_backward_cpu: the gradient begins empty and is resized as the input, contiguous.
at::Tensor glu_backward(const at::Tensor& grad_output, const at::Tensor& input, int64_t dim) {
  TORCH_CHECK(input.dim() > 0, "glu does not support 0-dimensional tensors");
  (void)grad_output;
  (void)dim;
  at::Tensor grad_input = at::empty({0}, input.options());
  grad_input.resize_as_(input);
  return grad_input;
}

// rrelu_with_noise_cpu: an output like the input, contiguous (the noise, given, is filled in
// place in training). Boxed: its noise is `Tensor` in LibTorch 2.5 and `Tensor(b!)` later.
void rrelu_with_noise(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t arguments = op.schema().arguments().size();
  at::Tensor out = at::empty_like(
      torch::jit::peek(*stack, 0, arguments).toTensor(), at::MemoryFormat::Contiguous);
  torch::jit::drop(*stack, arguments);
  torch::jit::push(*stack, std::move(out));
}

// abs.out, which the functional abs calls with an empty output: a unary TensorIterator
// resizes it to the input's sizes in the input's stride order, as on the CPU.
at::Tensor& abs_out(const at::Tensor& self, at::Tensor& out) {
  auto iter = at::TensorIterator::unary_op(out, self);
  return out;
}

}  // namespace

void register_activations(torch::Library& aten) {
  aten.impl("hardtanh", TORCH_FN(hardtanh));
  aten.impl("hardtanh_backward", TORCH_FN(hardtanh_backward));
  aten.impl("_prelu_kernel", TORCH_FN(prelu_kernel));
  aten.impl("_prelu_kernel_backward", TORCH_FN(prelu_kernel_backward));
  aten.impl("glu_backward", TORCH_FN(glu_backward));
  aten.impl("rrelu_with_noise", torch::CppFunction::makeFromBoxedFunction<&rrelu_with_noise>());
  aten.impl("abs.out", TORCH_FN(abs_out));
}

}  // namespace oomguard::meta
