// MakeOnMeta (<oomguard/meta/meta_device.h>): while one lives, a tensor factory given no
// device makes a Meta tensor. The guard includes the dispatch key DeferredInit in its
// thread's local dispatch key set, so every operator called on the thread comes first to the
// boxed fallback below (DeferredInit sits above autograd and every backend). A factory (an
// operator that takes no tensor: empty, zeros, ones, randn, full, arange, scalar_tensor, ...)
// whose `device` argument is None gets the Meta device in its place; then every operator goes
// on down the dispatcher unchanged, its BackendSelect kernel choosing the backend from the
// device it now has. A factory given a device keeps it; an operator on tensors is untouched,
// *_like factories too (their device is their input's).
#include <oomguard/meta/meta_device.h>

#include <mutex>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

namespace oomguard::meta {
namespace {

// Whether a value of `type` is or holds a tensor (Tensor, Tensor?, Tensor[], Tensor?[]).
bool holds_tensor(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::TensorType)
    return true;
  for (const c10::TypePtr& inner : type->containedTypes()) {
    if (holds_tensor(inner))
      return true;
  }
  return false;
}

void make_on_meta(
    const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  const std::vector<c10::Argument>& arguments = op.schema().arguments();
  const size_t first = stack->size() - arguments.size();
  size_t device = arguments.size();
  bool factory = true;
  for (size_t i = 0; i < arguments.size() && factory; ++i) {
    if (holds_tensor(arguments[i].type()))
      factory = false;
    else if (arguments[i].name() == "device")
      device = i;
  }
  if (factory && device < arguments.size() && (*stack)[first + device].isNone())
    (*stack)[first + device] = c10::IValue(c10::Device(c10::kMeta));
  op.redispatchBoxed(
      keys & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, c10::DispatchKey::DeferredInit),
      stack);
}

// The fallback's registration, never destroyed (as meta_device.cpp's kernels).
torch::Library* g_fallback = nullptr;

}  // namespace

MakeOnMeta::MakeOnMeta() {
  use_meta_device();
  static std::once_flag once;
  std::call_once(once, [] {
    g_fallback = new torch::Library(
        torch::Library::IMPL, "_", c10::DispatchKey::DeferredInit, __FILE__, __LINE__);
    g_fallback->fallback(torch::CppFunction::makeFromBoxedFunction<&make_on_meta>());
  });
  was_included_ = c10::impl::tls_is_dispatch_key_included(c10::DispatchKey::DeferredInit);
  c10::impl::tls_set_dispatch_key_included(c10::DispatchKey::DeferredInit, true);
}

MakeOnMeta::~MakeOnMeta() {
  c10::impl::tls_set_dispatch_key_included(c10::DispatchKey::DeferredInit, was_included_);
}

}  // namespace oomguard::meta
