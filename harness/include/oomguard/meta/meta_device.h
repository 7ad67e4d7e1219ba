#pragma once
// The Meta device: a run on tensors with sizes, dtypes and strides and no data, every storage
// counted by oomguard's Meta allocator (memory::TrackingAllocator::meta()) and, with a card,
// predicted by the caching-allocator model: a model too large for the runner is predicted
// from its shapes alone.
//
// What pure LibTorch lacks on Meta (PyTorch's Python fills it from
// torch/_meta_registrations.py, which a C++ program never loads) oomguard registers
// (harness/meta/, one file per family): layer norm forward and backward, index_select (so
// embedding) and embedding's backward, where, multinomial, relu, the fused AdamW step, a
// resize_ that counts the storage it grows, the reads of a value (_local_scalar_dense: item(),
// a stand-in, see below), the CPU's flash attention and scaled_dot_product_attention choosing
// the kernel the CPU would, convolution (transposed too), batch norm and log-sigmoid with
// their backwards. Each is checked against LibTorch's CPU kernel: the same output sizes,
// dtypes, strides and storage bytes, and the same aliasing (tests/meta/kernels_test.cpp).
//
// Values do not exist on Meta. A read of one (item(), a loss logged, clip_grad_norm_'s total)
// gets the stand-in 0 (false, 0, 0.0) of its dtype, so a loop that logs its loss runs; a stand-in
// used as a size gives a wrong figure, which C++ cannot stop. An operator whose output's shape
// depends on values (nonzero, masked_select, unique), or one without a Meta kernel, throws:
// refused_operator() names it, and a run ends there saying to run on CPU instead.
#include <exception>
#include <string>

namespace oomguard::meta {

// Installs the Meta allocator (memory::TrackingAllocator::meta()) and registers oomguard's Meta
// kernels; once per process, later calls do nothing. Every Meta tensor made after it is counted.
void use_meta_device();

// Ends the work at hand: `op` ("aten::eq") would decide it from values, which the Meta device
// does not have (`why` says what); refused_operator() names `op`.
[[noreturn]] void refuse_values(const std::string& op, const std::string& why);

// The operator a LibTorch error says has no Meta kernel or cannot run without values
// ("aten::nonzero"), or "" when `error` is not such a refusal.
std::string refused_operator(const std::exception& error);

}  // namespace oomguard::meta
