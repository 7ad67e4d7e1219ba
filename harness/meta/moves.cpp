// A module moved to the Meta device: torch::nn's Module::to(kMeta) sets each parameter's and
// buffer's data (Tensor::set_data) to its Meta copy, and set_data first asks the dispatched
// operator aten::_has_compatible_shallow_copy_type whether the two kinds of tensor may share
// one TensorImpl. LibTorch's answer (TensorImpl::has_compatible_shallow_copy_type) counts CPU,
// CUDA and the other dense backends as one kind and leaves Meta out, so the move is refused.
// A Meta tensor is dense and strided as they are, with a storage of the same shape and no
// data: the answer here adds Meta to the dense kind. set_data then copies the Meta tensor's
// metadata into the parameter's TensorImpl (storage, sizes, strides, dispatch keys, device),
// so the module's member, its named_parameters() and every other handle see the Meta tensor,
// and the CPU storage is released with its last reference. Gradients are not touched, as
// Module::to leaves them on every device.
#include <ATen/core/Tensor.h>

#include "harness/meta/kernels.h"

namespace oomguard::meta {
namespace {

bool dense_or_meta(const at::Tensor& t) {
  return t.layout() == at::kStrided &&
         (t.is_meta() || t.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(
                             c10::DispatchKeySet(c10::DispatchKey::CPU)));
}

// aten::_has_compatible_shallow_copy_type(Tensor self, Tensor from) -> bool
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  if ((self.is_meta() || from.is_meta()) && dense_or_meta(self) && dense_or_meta(from))
    return true;
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set());
}

}  // namespace

void register_moves(torch::Library& aten, torch::Library& autograd) {
  // set_data asks with the autograd keys on (AutogradMeta, the higher of the two tensors'
  // backends); without them (below autograd) the Meta key answers the same.
  aten.impl("_has_compatible_shallow_copy_type", has_compatible_shallow_copy_type);
  autograd.impl("_has_compatible_shallow_copy_type", has_compatible_shallow_copy_type);
}

}  // namespace oomguard::meta
