#pragma once
// oomguard's Meta kernels, by family; meta_device.cpp registers them all
// (<oomguard/meta/meta_device.h>). Each output is made as LibTorch's CPU kernel makes it: the
// same sizes, dtype, strides and storage bytes, new or aliasing as there.
#include <cstdint>
#include <vector>

#include <c10/core/SymIntArrayRef.h>
#include <torch/library.h>

namespace oomguard::meta {

// Sizes the dispatcher passes as SymInts, as the concrete integers they are on Meta.
inline std::vector<int64_t> concrete(c10::SymIntArrayRef values) {
  std::vector<int64_t> out;
  for (const c10::SymInt& v : values)
    out.push_back(v.guard_int(__FILE__, __LINE__));
  return out;
}

// native_layer_norm, native_group_norm and their backwards.
void register_norms(torch::Library& aten);
// index_select (embedding's forward), embedding_dense_backward, where.self and its out=,
// _embedding_bag (and _forward_only) with its backwards (dense, per-sample weights).
void register_indexing(torch::Library& aten);
// equal (true for the same tensor alone), _local_scalar_dense (the stand-in value), multinomial,
// relu and relu_ (clamp_min, as LibTorch computes them), resize_ (the storage it grows comes from
// the Meta allocator), _fused_adamw_ and _amp_foreach_non_finite_check_and_unscale_ (in place:
// nothing new).
void register_values(torch::Library& aten);
// convolution (transposed too) and its backward, native_batch_norm and its backward,
// log_sigmoid_forward and its backward (a DCGAN's generator and discriminator).
void register_convolution(torch::Library& aten);
// _fused_sdp_choice (the CPU's choice for these shapes), the CPU's flash attention forward
// and backward, and (in `autograd`, the AutogradMeta key's) scaled_dot_product_attention
// calling the kernel the CPU would.
void register_attention(torch::Library& aten, torch::Library& autograd);
// hardtanh and its backward, _prelu_kernel and its backward, glu_backward, rrelu_with_noise,
// abs.out (Hardtanh, ReLU6, PReLU, GLU, RReLU, Softsign).
void register_activations(torch::Library& aten);
// im2col and col2im (Unfold, Fold), reflection_pad2d and its backward, the backwards of
// replication_pad2d and 3d, _adaptive_avg_pool2d and 3d and their backwards,
// max_pool3d_with_indices and its backward, fractional_max_pool3d_backward, max_unpool2d and 3d.
void register_pooling(torch::Library& aten);
// mse_loss_backward, smooth_l1_loss_backward.grad_input, huber_loss and huber_loss_backward.out,
// multi_margin_loss, multilabel_margin_loss_forward, binary_cross_entropy and their backwards,
// _ctc_loss and its backward (both overloads; with lengths as tensors, 2-d targets only).
void register_losses(torch::Library& aten);
// _has_compatible_shallow_copy_type answering that a dense tensor (CPU, CUDA) and a Meta one
// may share a TensorImpl, so Module::to(kMeta) moves a module's parameters and buffers (in
// `aten`, the Meta key's, and `autograd`, the AutogradMeta key's).
void register_moves(torch::Library& aten, torch::Library& autograd);

}  // namespace oomguard::meta
