#pragma once
// Gradient checkpointing for LibTorch: a block's forward runs without keeping its activations;
// backward runs it again, with the RNG state of the first run, and backpropagates through that.
#include <functional>

#include <ATen/core/Tensor.h>

namespace oomguard::models {

using BlockFn = std::function<at::Tensor(const at::Tensor&)>;

// y = block(x), keeping only x for backward instead of every activation inside the block.
// Backward recomputes block(x) with grad mode on, with the default CPU generator's state as
// it was before the first call (so dropout draws the same masks) and CUDA autocast as it was
// in the forward (on, its dtype, its cache: a mixed-precision forward recomputes in mixed
// precision, whatever the backward runs in; an autocast region, as torch.utils.checkpoint's,
// so its weight casts leave the cache when the recompute ends), and accumulates into .grad
// of the parameters `block` reads, as a plain backward would. Outside grad mode it is a
// plain call. `block` must not change what it computes between forward and backward.
at::Tensor checkpoint(const BlockFn& block, const at::Tensor& x);

}  // namespace oomguard::models
