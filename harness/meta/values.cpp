// Meta kernels of values and storages (harness/meta/kernels.h).
#include "harness/meta/kernels.h"

#include <optional>

#include <ATen/EmptyTensor.h>
#include <ATen/core/Generator.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/empty.h>
#include <c10/core/MemoryFormat.h>
#include <c10/core/Scalar.h>
#include <c10/core/SymInt.h>
#include <c10/core/SymIntArrayRef.h>
#include <c10/util/Exception.h>

#include <oomguard/memory/tracking_allocator.h>

namespace oomguard::meta {
namespace {

// A read of a value that does not exist: the stand-in 0 of the tensor's dtype
// (<oomguard/meta/meta_device.h>).
c10::Scalar local_scalar_dense(const at::Tensor& self) {
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(), " elements cannot be a Scalar");
  if (self.scalar_type() == at::kBool)
    return c10::Scalar(false);
  if (at::isIntegralType(self.scalar_type(), /*includeBool=*/false))
    return c10::Scalar(int64_t{0});
  if (at::isComplexType(self.scalar_type()))
    return c10::Scalar(c10::complex<double>(0.0, 0.0));
  return c10::Scalar(0.0);
}

// LibTorch's multinomial: [rows, n] (or [n] of a vector) of int64, contiguous. Boxed: its
// num_samples is an int in LibTorch 2.5 and a SymInt later, and a boxed kernel takes either.
void multinomial(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t arguments = op.schema().arguments().size();
  const at::Tensor self = torch::jit::peek(*stack, 0, arguments).toTensor();
  const c10::IValue& samples = torch::jit::peek(*stack, 1, arguments);
  const int64_t n =
      samples.isInt() ? samples.toInt() : samples.toSymInt().guard_int(__FILE__, __LINE__);
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "prob_dist must be 1 or 2 dim, got ", self.dim());
  at::Tensor out = self.dim() == 1 ? at::empty({n}, self.options().dtype(at::kLong))
                                   : at::empty({self.size(0), n}, self.options().dtype(at::kLong));
  torch::jit::drop(*stack, arguments);
  torch::jit::push(*stack, std::move(out));
}

// resize_: the new sizes (and strides for `format`); a storage that must grow gets a new
// allocation of the Meta allocator, as resize_ on the CPU reallocates it (LibTorch's own Meta
// resize_ only records the new byte count, so the growth would go uncounted).
const at::Tensor& resize(
    const at::Tensor& self, c10::SymIntArrayRef size, std::optional<c10::MemoryFormat> format) {
  c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  std::vector<int64_t> sizes;
  for (const c10::SymInt& s : size)
    sizes.push_back(s.guard_int(__FILE__, __LINE__));
  impl->set_sizes_contiguous(sizes);
  if (format.has_value() && *format != c10::MemoryFormat::Preserve)
    impl->empty_tensor_restride(*format);
  if (impl->numel() == 0)
    return self;
  const auto needed = static_cast<int64_t>(at::detail::computeStorageNbytes(
      self.sizes(),
      self.strides(),
      self.dtype().itemsize(),
      static_cast<size_t>(self.storage_offset())));
  const c10::Storage& storage = impl->unsafe_storage();
  if (needed > static_cast<int64_t>(storage.nbytes())) {
    c10::DataPtr grown = memory::TrackingAllocator::meta().allocate(static_cast<size_t>(needed));
    storage.unsafeGetStorageImpl()->set_data_ptr_noswap(std::move(grown));
    storage.unsafeGetStorageImpl()->set_nbytes(static_cast<size_t>(needed));
  }
  return self;
}

// relu, as LibTorch's CPU and CUDA kernels compute it: clamp_min(self, 0), whose Meta kernel
// LibTorch has.
at::Tensor relu(const at::Tensor& self) {
  return at::clamp_min(self, 0);
}

at::Tensor& relu_(at::Tensor& self) {
  return at::clamp_min_(self, 0);
}

// The fused AdamW step (both overloads) and the loss scaler's unscale with its inf check
// (_amp_foreach_non_finite_check_and_unscale_, GradScaler's): in place, they make nothing
// and return nothing.
void makes_nothing(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  torch::jit::drop(*stack, op.schema().arguments().size());
}

// equal, a value read that only picks a path (MultiheadAttention asks whether query, key and
// value are one tensor, to project them with one product): true for the same tensor (one
// storage, offset, sizes and strides, as LibTorch's own fast path finds), false for any other
// pair, whose values are not there to compare (two copies of the same values are equal on the
// CPU).
bool equal(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.device() == other.device(), "Cannot compare two tensors on different devices");
  TORCH_CHECK(
      self.dtype() == other.dtype(),
      "Expected object of scalar type ",
      self.dtype(),
      " but got ",
      other.dtype(),
      " for argument 'other'");
  return self.is_same_size(other) && self.is_alias_of(other) &&
         self.storage_offset() == other.storage_offset() && self.strides() == other.strides() &&
         self.is_neg() == other.is_neg() && self.is_conj() == other.is_conj();
}

}  // namespace

void register_values(torch::Library& aten) {
  aten.impl("equal", TORCH_FN(equal));
  aten.impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));
  aten.impl("relu", TORCH_FN(relu));
  aten.impl("relu_", TORCH_FN(relu_));
  aten.impl("multinomial", torch::CppFunction::makeFromBoxedFunction<&multinomial>());
  aten.impl("resize_", TORCH_FN(resize));
  aten.impl("_fused_adamw_", torch::CppFunction::makeFromBoxedFunction<&makes_nothing>());
  aten.impl("_fused_adamw_.tensor_lr", torch::CppFunction::makeFromBoxedFunction<&makes_nothing>());
  aten.impl(
      "_amp_foreach_non_finite_check_and_unscale_",
      torch::CppFunction::makeFromBoxedFunction<&makes_nothing>());
}

}  // namespace oomguard::meta
