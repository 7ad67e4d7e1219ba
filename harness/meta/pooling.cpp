// Meta kernels of pooling, padding, fold and unfold (harness/meta/kernels.h), each making what
// LibTorch's CPU kernel makes: an output begun empty and resized as the CPU's is (through the
// Meta resize_, so its storage is counted), and the contiguous copies the CPU kernel takes of
// an input that is not contiguous.
#include "harness/meta/kernels.h"

#include <tuple>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/native/Pool.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/SymIntArrayRef.h>
#include <c10/util/Exception.h>

namespace oomguard::meta {
namespace {

// The input's sizes with the last `spatial` dimensions replaced by `last`.
std::vector<int64_t> with_last(const at::Tensor& input, const std::vector<int64_t>& last) {
  std::vector<int64_t> sizes = input.sizes().vec();
  const size_t first = sizes.size() - last.size();
  for (size_t i = 0; i < last.size(); ++i)
    sizes[first + i] = last[i];
  return sizes;
}

// An output begun empty and resized to `sizes`, in the input's suggested memory format where
// the CPU kernel keeps it (4-d and 5-d batched inputs).
at::Tensor resized_output(const at::Tensor& input, const std::vector<int64_t>& sizes) {
  at::Tensor out = at::empty({0}, input.options());
  if (input.dim() == 4 || input.dim() == 5)
    out.resize_(sizes, input.suggest_memory_format());
  else
    out.resize_(sizes);
  return out;
}

// im2col_cpu: an output like the input (empty_like, contiguous), the input made contiguous,
// then the output resized to [N, C * kh * kw, L] (L the blocks), without the batch for a 3-d
// input.
at::Tensor im2col(
    const at::Tensor& self,
    at::IntArrayRef kernel_size,
    at::IntArrayRef dilation,
    at::IntArrayRef padding,
    at::IntArrayRef stride) {
  TORCH_CHECK(
      kernel_size.size() == 2 && dilation.size() == 2 && padding.size() == 2 && stride.size() == 2,
      "im2col: each of kernel_size, dilation, padding and stride must have 2 values");
  at::Tensor output = at::empty_like(self, at::MemoryFormat::Contiguous);
  const at::Tensor input = self.contiguous();
  const bool batched = input.dim() == 4;
  const int64_t c = input.size(-3), h = input.size(-2), w = input.size(-1);
  const int64_t oh =
      (h + 2 * padding[0] - (dilation[0] * (kernel_size[0] - 1) + 1)) / stride[0] + 1;
  const int64_t ow =
      (w + 2 * padding[1] - (dilation[1] * (kernel_size[1] - 1) + 1)) / stride[1] + 1;
  std::vector<int64_t> sizes = {c * kernel_size[0] * kernel_size[1], oh * ow};
  if (batched)
    sizes.insert(sizes.begin(), input.size(0));
  output.resize_(sizes);
  return output;
}

// col2im_cpu: an output like the input (empty_like, contiguous), the input made contiguous,
// then the output resized to [N, C, out_h, out_w] (C the input's rows / (kh * kw)).
at::Tensor col2im(
    const at::Tensor& self,
    c10::SymIntArrayRef output_size,
    at::IntArrayRef kernel_size,
    at::IntArrayRef /*dilation*/,
    at::IntArrayRef /*padding*/,
    at::IntArrayRef /*stride*/) {
  const std::vector<int64_t> out = concrete(output_size);
  TORCH_CHECK(out.size() == 2 && kernel_size.size() == 2, "col2im: expected 2 values each");
  at::Tensor output = at::empty_like(self, at::MemoryFormat::Contiguous);
  const at::Tensor input = self.contiguous();
  const int64_t planes = input.size(-2) / (kernel_size[0] * kernel_size[1]);
  std::vector<int64_t> sizes = {planes, out[0], out[1]};
  if (input.dim() == 3)
    sizes.insert(sizes.begin(), input.size(0));
  output.resize_(sizes);
  return output;
}

// reflection_pad2d_cpu: an output begun empty and resized to the padded sizes.
at::Tensor reflection_pad2d(const at::Tensor& self, c10::SymIntArrayRef padding) {
  const std::vector<int64_t> p = concrete(padding);
  TORCH_CHECK(p.size() == 4, "reflection_pad2d: padding must have 4 values");
  const at::Tensor input = self.contiguous();
  return resized_output(
      input, with_last(input, {input.size(-2) + p[2] + p[3], input.size(-1) + p[0] + p[1]}));
}

// The padding backwards (reflection 2d, replication 2d and 3d): the input's gradient, zeros
// like it in its suggested memory format; the incoming gradient made contiguous.
at::Tensor pad_backward(
    const at::Tensor& grad_output, const at::Tensor& self, c10::SymIntArrayRef /*padding*/) {
  at::Tensor grad_input = at::zeros_like(self, self.suggest_memory_format());
  const at::Tensor grad = grad_output.contiguous();
  (void)grad;
  return grad_input;
}

// _adaptive_avg_pool2d and 3d: an output begun empty, resized to the output size.
at::Tensor adaptive_avg_pool(const at::Tensor& self, c10::SymIntArrayRef output_size) {
  return resized_output(self, with_last(self, concrete(output_size)));
}

// Their backwards: the input's gradient begun empty, resized like the input.
at::Tensor adaptive_avg_pool_backward(const at::Tensor& grad_output, const at::Tensor& self) {
  (void)grad_output;
  return resized_output(self, self.sizes().vec());
}

// max_pool3d_with_indices_cpu: the output and its int64 indices, each begun empty and resized
// to the pooled sizes.
std::tuple<at::Tensor, at::Tensor> max_pool3d_with_indices(
    const at::Tensor& self,
    at::IntArrayRef kernel_size,
    at::IntArrayRef stride,
    at::IntArrayRef padding,
    at::IntArrayRef dilation,
    bool ceil_mode) {
  const auto at_or = [](at::IntArrayRef v, size_t i, int64_t otherwise) {
    return v.empty() ? otherwise : v.size() == 1 ? v[0] : v[i];
  };
  std::vector<int64_t> pooled;
  for (size_t i = 0; i < 3; ++i) {
    const int64_t k = at_or(kernel_size, i, 1);
    pooled.push_back(at::native::pooling_output_shape<int64_t>(
        self.size(self.dim() - 3 + static_cast<int64_t>(i)),
        k,
        at_or(padding, i, 0),
        at_or(stride, i, k),
        at_or(dilation, i, 1),
        ceil_mode));
  }
  const std::vector<int64_t> sizes = with_last(self, pooled);
  at::Tensor output = resized_output(self, sizes);
  at::Tensor indices = at::empty({0}, self.options().dtype(at::kLong));
  if (self.dim() == 5)
    indices.resize_(sizes, self.suggest_memory_format());
  else
    indices.resize_(sizes);
  return {output, indices};
}

// max_pool3d_with_indices_backward_cpu: the input's gradient begun empty, resized like it,
// zeroed.
at::Tensor max_pool3d_with_indices_backward(
    const at::Tensor& /*grad_output*/,
    const at::Tensor& self,
    at::IntArrayRef /*kernel_size*/,
    at::IntArrayRef /*stride*/,
    at::IntArrayRef /*padding*/,
    at::IntArrayRef /*dilation*/,
    bool /*ceil_mode*/,
    const at::Tensor& /*indices*/) {
  return resized_output(self, self.sizes().vec());
}

// fractional_max_pool3d_backward_cpu: the input's gradient begun empty and resized like it,
// the incoming gradient made contiguous.
at::Tensor fractional_max_pool3d_backward(
    const at::Tensor& grad_output,
    const at::Tensor& self,
    at::IntArrayRef /*kernel_size*/,
    at::IntArrayRef /*output_size*/,
    const at::Tensor& /*indices*/) {
  at::Tensor grad_input = at::empty({0}, self.options());
  grad_input.resize_as_(self);
  const at::Tensor grad = grad_output.contiguous();
  (void)grad;
  return grad_input;
}

// max_unpooling2d_forward_cpu and 3d: the input and indices made contiguous (in the input's
// memory format), the output begun empty and resized to the output size.
at::Tensor max_unpool(
    const at::Tensor& self, const at::Tensor& indices, const std::vector<int64_t>& output_size) {
  const at::MemoryFormat format = self.suggest_memory_format();
  const at::Tensor input = self.contiguous(format);
  const at::Tensor where = indices.contiguous(format);
  (void)where;
  return resized_output(input, with_last(input, output_size));
}

at::Tensor max_unpool2d(
    const at::Tensor& self, const at::Tensor& indices, c10::SymIntArrayRef output_size) {
  return max_unpool(self, indices, concrete(output_size));
}

at::Tensor max_unpool3d(
    const at::Tensor& self,
    const at::Tensor& indices,
    c10::SymIntArrayRef output_size,
    at::IntArrayRef /*stride*/,
    at::IntArrayRef /*padding*/) {
  return max_unpool(self, indices, concrete(output_size));
}

}  // namespace

void register_pooling(torch::Library& aten) {
  aten.impl("im2col", TORCH_FN(im2col));
  aten.impl("col2im", TORCH_FN(col2im));
  aten.impl("reflection_pad2d", TORCH_FN(reflection_pad2d));
  aten.impl("reflection_pad2d_backward", TORCH_FN(pad_backward));
  aten.impl("replication_pad2d_backward", TORCH_FN(pad_backward));
  aten.impl("replication_pad3d_backward", TORCH_FN(pad_backward));
  aten.impl("_adaptive_avg_pool2d", TORCH_FN(adaptive_avg_pool));
  aten.impl("_adaptive_avg_pool3d", TORCH_FN(adaptive_avg_pool));
  aten.impl("_adaptive_avg_pool2d_backward", TORCH_FN(adaptive_avg_pool_backward));
  aten.impl("_adaptive_avg_pool3d_backward", TORCH_FN(adaptive_avg_pool_backward));
  aten.impl("max_pool3d_with_indices", TORCH_FN(max_pool3d_with_indices));
  aten.impl("max_pool3d_with_indices_backward", TORCH_FN(max_pool3d_with_indices_backward));
  aten.impl("fractional_max_pool3d_backward", TORCH_FN(fractional_max_pool3d_backward));
  aten.impl("max_unpool2d", TORCH_FN(max_unpool2d));
  aten.impl("max_unpool3d", TORCH_FN(max_unpool3d));
}

}  // namespace oomguard::meta
