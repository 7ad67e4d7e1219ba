#pragma once
// The Meta twin of a CPU tensor, for checking a Meta kernel against the CPU's.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_strided.h>

namespace oomguard::meta {

// The same sizes, strides and dtype on the Meta device (through the Meta allocator).
inline at::Tensor on_meta(const at::Tensor& cpu) {
  return at::empty_strided(cpu.sizes(), cpu.strides(), cpu.options().device(at::kMeta));
}

}  // namespace oomguard::meta
