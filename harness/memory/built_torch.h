#pragma once
// The LibTorch this code is compiled against: the one place its version macros are read.
#include <string>

#include <torch/version.h>

#include <oomguard/sim/alloc_conf.h>

namespace oomguard::memory {

// MAJOR.MINOR, as the allocator model and the allocator settings name versions.
inline sim::TorchVersion built_torch_version() {
  return {TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR};
}

// The whole version, "2.15.0", as reports give it.
inline std::string built_torch_version_text() {
  return TORCH_VERSION;
}

}  // namespace oomguard::memory
