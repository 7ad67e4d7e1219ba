// Meta kernels of losses (harness/meta/kernels.h): each makes what LibTorch's CPU kernel
// makes, in its order; a loss the CPU computes element by element and then reduces makes the
// element-wise tensor here too, and reduces it with LibTorch's own Meta reductions.
#include "harness/meta/kernels.h"

#include <tuple>
#include <vector>

#include <ATen/TensorIterator.h>
#include <ATen/core/Reduction.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/full_like.h>
#include <ATen/ops/zeros_like.h>
#include <c10/util/Exception.h>

#include <oomguard/meta/meta_device.h>

namespace oomguard::meta {
namespace {

// apply_loss_reduction: the element-wise loss, or its mean or sum.
at::Tensor reduced(const at::Tensor& loss, int64_t reduction) {
  if (reduction == at::Reduction::Mean)
    return loss.mean();
  if (reduction == at::Reduction::Sum)
    return loss.sum();
  return loss;
}

// The gradient a backward makes as zeros like the input, contiguous (mse_loss_backward,
// multilabel_margin_loss_backward).
at::Tensor zeros_like_input(const at::Tensor& input) {
  return at::zeros_like(input, at::MemoryFormat::Contiguous);
}

at::Tensor mse_loss_backward(
    const at::Tensor& /*grad_output*/,
    const at::Tensor& self,
    const at::Tensor& /*target*/,
    int64_t /*reduction*/) {
  return zeros_like_input(self);
}

// An out= gradient that LibTorch's functional form made before calling it: resized where it
// is not the input's shape (smooth_l1_loss_backward.grad_input, huber_loss_backward.out).
at::Tensor& resized_to_input(const at::Tensor& self, at::Tensor& grad_input) {
  if (grad_input.sizes() != self.sizes())
    grad_input.resize_(self.sizes());
  return grad_input;
}

at::Tensor& smooth_l1_loss_backward_out(
    const at::Tensor& /*grad_output*/,
    const at::Tensor& self,
    const at::Tensor& /*target*/,
    int64_t /*reduction*/,
    double /*beta*/,
    at::Tensor& grad_input) {
  return resized_to_input(self, grad_input);
}

at::Tensor& huber_loss_backward_out(
    const at::Tensor& /*grad_output*/,
    const at::Tensor& self,
    const at::Tensor& /*target*/,
    int64_t /*reduction*/,
    double /*delta*/,
    at::Tensor& grad_input) {
  return resized_to_input(self, grad_input);
}

// huber_loss: a binary TensorIterator of input and target makes the element-wise loss, then
// reduced.
at::Tensor huber_loss(const at::Tensor& self, const at::Tensor& target, int64_t reduction, double) {
  at::Tensor loss;
  auto iter = at::TensorIterator::borrowing_binary_op(loss, self, target);
  return reduced(iter.output(), reduction);
}

// multi_margin_loss_cpu: the output begun empty, resized to [N] unreduced or a scalar; the
// input, target and weight made contiguous.
at::Tensor multi_margin_loss(
    const at::Tensor& self,
    const at::Tensor& target,
    const c10::Scalar& /*p*/,
    const c10::Scalar& /*margin*/,
    const std::optional<at::Tensor>& weight,
    int64_t reduction) {
  at::Tensor output = at::empty({0}, self.options());
  if (reduction == at::Reduction::None && target.dim() > 0)
    output.resize_({self.dim() <= 1 ? 1 : self.size(0)});
  else
    output.resize_({});
  const at::Tensor input = self.contiguous(), targets = target.contiguous();
  const at::Tensor weights =
      weight.has_value() && weight->defined() ? weight->contiguous() : at::Tensor();
  return output;
}

// multi_margin_loss_cpu_backward: the gradient begun empty and resized like the input.
at::Tensor multi_margin_loss_backward(
    const at::Tensor& /*grad_output*/,
    const at::Tensor& self,
    const at::Tensor& target,
    const c10::Scalar& /*p*/,
    const c10::Scalar& /*margin*/,
    const std::optional<at::Tensor>& weight,
    int64_t /*reduction*/) {
  at::Tensor grad_input = at::empty({0}, self.options());
  grad_input.resize_as_(self);
  const at::Tensor input = self.contiguous(), targets = target.contiguous();
  const at::Tensor weights =
      weight.has_value() && weight->defined() ? weight->contiguous() : at::Tensor();
  return grad_input;
}

// multilabel_margin_loss_forward_cpu: the output (a scalar, or [N] unreduced) and is_target,
// like the target in the input's dtype, each begun empty and resized.
std::tuple<at::Tensor, at::Tensor> multilabel_margin_loss_forward(
    const at::Tensor& self, const at::Tensor& target, int64_t reduction) {
  at::Tensor output = at::empty({0}, self.options());
  at::Tensor is_target = at::empty({0}, self.options());
  if (reduction != at::Reduction::None || target.dim() <= 1)
    output.resize_({});
  else
    output.resize_({self.size(0)});
  is_target.resize_as_(target);
  const at::Tensor input = self.contiguous(), targets = target.contiguous();
  return {output, is_target};
}

at::Tensor multilabel_margin_loss_backward(
    const at::Tensor& /*grad_output*/,
    const at::Tensor& self,
    const at::Tensor& /*target*/,
    int64_t /*reduction*/,
    const at::Tensor& /*is_target*/) {
  return zeros_like_input(self);
}

// binary_cross_entropy_cpu: the element-wise loss like the input; reduced, it keeps its
// storage (resize_as_ the reduced scalar, then copied into), as LibTorch's returned loss does.
at::Tensor binary_cross_entropy(
    const at::Tensor& self,
    const at::Tensor& /*target*/,
    const std::optional<at::Tensor>& weight,
    int64_t reduction) {
  at::Tensor loss = at::empty_like(self);
  if (weight.has_value() && weight->defined())
    loss.mul_(*weight);
  if (reduction != at::Reduction::None) {
    const at::Tensor scalar = reduced(loss, reduction);
    loss.resize_as_(scalar);
  }
  return loss;
}

// binary_cross_entropy_backward_cpu: the gradient like the input, weighted and divided in place.
at::Tensor binary_cross_entropy_backward(
    const at::Tensor& /*grad_output*/,
    const at::Tensor& self,
    const at::Tensor& /*target*/,
    const std::optional<at::Tensor>& weight,
    int64_t reduction) {
  at::Tensor grad_input = at::empty_like(self);
  if (weight.has_value() && weight->defined())
    grad_input.mul_(*weight);
  if (reduction == at::Reduction::Mean)
    grad_input.div_(self.numel());
  return grad_input;
}

// ctc_loss_cpu: the negative log-likelihood [B] and log_alpha [B, T, 2 L + 1], L the longest
// target. With lengths as tensors their values are not there: L is the padded targets' width,
// an upper bound, equal to the CPU's when the longest target fills it; concatenated (1-d)
// targets would need the lengths' values for L, and are refused.
std::tuple<at::Tensor, at::Tensor> ctc_outputs(const at::Tensor& log_probs, int64_t longest) {
  TORCH_CHECK(
      log_probs.dim() == 3, "ctc_loss: expected log_probs of [T, B, C], got ", log_probs.sizes());
  at::Tensor log_alpha =
      at::empty({log_probs.size(1), log_probs.size(0), 2 * longest + 1}, log_probs.options());
  at::Tensor neg_log_likelihood = at::empty({log_probs.size(1)}, log_probs.options());
  return {neg_log_likelihood, log_alpha};
}

std::tuple<at::Tensor, at::Tensor> ctc_loss_tensor(
    const at::Tensor& log_probs,
    const at::Tensor& targets,
    const at::Tensor& /*input_lengths*/,
    const at::Tensor& /*target_lengths*/,
    int64_t /*blank*/,
    bool /*zero_infinity*/) {
  if (targets.dim() != 2)
    refuse_values(
        "aten::_ctc_loss.Tensor",
        "with 1-d (concatenated) targets the target lengths' values decide "
        "log_alpha's size; give 2-d (padded) targets");
  return ctc_outputs(log_probs, targets.size(1));
}

std::tuple<at::Tensor, at::Tensor> ctc_loss_ints(
    const at::Tensor& log_probs,
    const at::Tensor& /*targets*/,
    at::IntArrayRef /*input_lengths*/,
    at::IntArrayRef target_lengths,
    int64_t /*blank*/,
    bool /*zero_infinity*/) {
  int64_t longest = 0;
  for (const int64_t length : target_lengths)
    longest = std::max(longest, length);
  return ctc_outputs(log_probs, longest);
}

// ctc_loss_backward_cpu: the gradient like log_probs (full_like, contiguous), and log_beta like
// log_alpha for the while.
at::Tensor ctc_backward(const at::Tensor& log_probs, const at::Tensor& log_alpha) {
  at::Tensor grad = at::full_like(log_probs, -1.0, at::MemoryFormat::Contiguous);
  const at::Tensor log_beta = at::empty_like(log_alpha, at::MemoryFormat::Contiguous);
  return grad;
}

at::Tensor ctc_loss_backward_tensor(
    const at::Tensor& /*grad*/,
    const at::Tensor& log_probs,
    const at::Tensor& /*targets*/,
    const at::Tensor& /*input_lengths*/,
    const at::Tensor& /*target_lengths*/,
    const at::Tensor& /*neg_log_likelihood*/,
    const at::Tensor& log_alpha,
    int64_t /*blank*/,
    bool /*zero_infinity*/) {
  return ctc_backward(log_probs, log_alpha);
}

at::Tensor ctc_loss_backward_ints(
    const at::Tensor& /*grad*/,
    const at::Tensor& log_probs,
    const at::Tensor& /*targets*/,
    at::IntArrayRef /*input_lengths*/,
    at::IntArrayRef /*target_lengths*/,
    const at::Tensor& /*neg_log_likelihood*/,
    const at::Tensor& log_alpha,
    int64_t /*blank*/,
    bool /*zero_infinity*/) {
  return ctc_backward(log_probs, log_alpha);
}

}  // namespace

void register_losses(torch::Library& aten) {
  aten.impl("mse_loss_backward", TORCH_FN(mse_loss_backward));
  aten.impl("smooth_l1_loss_backward.grad_input", TORCH_FN(smooth_l1_loss_backward_out));
  aten.impl("huber_loss", TORCH_FN(huber_loss));
  aten.impl("huber_loss_backward.out", TORCH_FN(huber_loss_backward_out));
  aten.impl("multi_margin_loss", TORCH_FN(multi_margin_loss));
  aten.impl("multi_margin_loss_backward", TORCH_FN(multi_margin_loss_backward));
  aten.impl("multilabel_margin_loss_forward", TORCH_FN(multilabel_margin_loss_forward));
  aten.impl("multilabel_margin_loss_backward", TORCH_FN(multilabel_margin_loss_backward));
  aten.impl("binary_cross_entropy", TORCH_FN(binary_cross_entropy));
  aten.impl("binary_cross_entropy_backward", TORCH_FN(binary_cross_entropy_backward));
  aten.impl("_ctc_loss", TORCH_FN(ctc_loss_ints));
  aten.impl("_ctc_loss.Tensor", TORCH_FN(ctc_loss_tensor));
  aten.impl("_ctc_loss_backward", TORCH_FN(ctc_loss_backward_ints));
  aten.impl("_ctc_loss_backward.Tensor", TORCH_FN(ctc_loss_backward_tensor));
}

}  // namespace oomguard::meta
