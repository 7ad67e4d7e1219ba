#include <oomguard/meta/meta_device.h>

#include <memory>
#include <mutex>
#include <regex>

#include <c10/util/Exception.h>
#include <torch/library.h>

#include <oomguard/memory/tracking_allocator.h>
#include "harness/meta/kernels.h"

namespace oomguard::meta {
namespace {

// resize_ and _fused_sdp_choice have Meta kernels of LibTorch's own, which oomguard's replace;
// the dispatcher warns of each replacement, which is meant here.
class Quiet final : public c10::WarningHandler {
 public:
  void process(const c10::Warning&) override {}
};

}  // namespace

namespace {

// The registrations, never destroyed (the kernels stay registered for the life of the
// process, and the dispatcher may be gone at exit), held where they stay reachable.
torch::Library* g_meta_kernels = nullptr;
torch::Library* g_autograd_meta_kernels = nullptr;

}  // namespace

void use_meta_device() {
  static std::once_flag once;
  std::call_once(once, [] {
    memory::TrackingAllocator::meta();
    Quiet quiet;
    const c10::WarningUtils::WarningHandlerGuard guard(&quiet);
    g_meta_kernels = new torch::Library(
        torch::Library::IMPL, "aten", c10::DispatchKey::Meta, __FILE__, __LINE__);
    register_norms(*g_meta_kernels);
    register_indexing(*g_meta_kernels);
    register_values(*g_meta_kernels);
    register_convolution(*g_meta_kernels);
    register_activations(*g_meta_kernels);
    register_pooling(*g_meta_kernels);
    register_losses(*g_meta_kernels);
    g_autograd_meta_kernels = new torch::Library(
        torch::Library::IMPL, "aten", c10::DispatchKey::AutogradMeta, __FILE__, __LINE__);
    register_attention(*g_meta_kernels, *g_autograd_meta_kernels);
    register_moves(*g_meta_kernels, *g_autograd_meta_kernels);
  });
}

void refuse_values(const std::string& op, const std::string& why) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, op, ": its result is data-dependent, and the Meta device has no values: ", why);
}

std::string refused_operator(const std::exception& error) {
  const std::string what = error.what();
  std::smatch m;
  static const std::regex no_kernel(
      R"((aten::[A-Za-z0-9_.]+): attempted to run this operator with Meta tensors)");
  static const std::regex no_backend(
      R"(Could not run '(aten::[A-Za-z0-9_.]+)' with arguments from the 'Meta' backend)");
  static const std::regex overrideable(R"(^([a-z0-9_]+_overrideable) not implemented)");
  static const std::regex data_dependent(R"((aten::[A-Za-z0-9_.]+)[^\n]*data-dependent)");
  static const std::regex unsupported(
      R"((aten::[A-Za-z0-9_.]+): [^\n]*not supported on the Meta device)");
  if (std::regex_search(what, m, no_kernel) || std::regex_search(what, m, no_backend) ||
      std::regex_search(what, m, data_dependent) || std::regex_search(what, m, unsupported))
    return m[1];
  if (std::regex_search(what, m, overrideable))
    return "aten::" + std::string(m[1]);
  return "";
}

}  // namespace oomguard::meta
