#pragma once
// The Meta device: a run on tensors with sizes, dtypes and strides and no data, every storage
// counted by oomguard's Meta allocator (memory::TrackingAllocator::meta()) and, with a card,
// predicted by the caching-allocator model: a model too large for the runner is predicted
// from its shapes alone.
//
// What pure LibTorch lacks on Meta (PyTorch's Python fills it from
// torch/_meta_registrations.py, which a C++ program never loads), or does there otherwise than
// the CPU (resize_, _fused_sdp_choice, scaled_dot_product_attention: use_meta_device()),
// oomguard registers (harness/meta/, one file per family, harness/meta/kernels.h lists them):
// the norms (layer, group, batch), embedding and embedding bags, convolutions, attention, the
// activations, poolings, paddings, fold and unfold, and losses that torch::nn's modules need,
// the fused AdamW step, item()'s stand-in (below), and _has_compatible_shallow_copy_type, so
// that Module::to(kMeta) moves a torch::nn module (or one of a user's own) to Meta: every
// parameter and buffer, in place, the handles kept, the CPU storage released, gradients left
// where they were (harness/meta/moves.cpp, tests/meta/moves_test.cpp). Each kernel is checked
// against LibTorch's CPU kernel: the same output sizes, dtypes, strides and storage bytes, and
// the same aliasing (tests/meta/kernels_test.cpp, module_kernels_test.cpp). Every module of
// torch::nn trains a step on Meta, predicted as on the CPU, but AdaptiveLogSoftmaxWithLoss (a
// nonzero) and CTCLoss with concatenated targets: harness/meta/modules.md, written by the
// test that runs them all.
//
// A value read that only picks a path answers from what Meta knows: equal() is true for the
// same tensor alone (MultiheadAttention's one projection of query, key and value).
// CTC's log_alpha is sized by the padded targets' width (an upper bound, exact when the
// longest target fills it; concatenated targets are refused), and an embedding bag's max
// backward takes every bag as non-empty.
//
// Values do not exist on Meta. A read of one (item(), a loss logged, clip_grad_norm_'s total)
// gets the stand-in 0 (false, 0, 0.0) of its dtype, so a loop that logs its loss runs; a
// stand-in used as a size gives a wrong figure, which C++ cannot stop. An operator whose
// output's shape depends on values (nonzero, masked_select, unique), or one without a Meta
// kernel, throws: refused_operator() names it, and a run ends there saying to run on CPU
// instead.
#include <exception>
#include <string>

namespace oomguard::meta {

// Installs the Meta allocator (memory::TrackingAllocator::meta()) and registers oomguard's Meta
// kernels; once per process, later calls do nothing. Every Meta tensor made after it is
// counted. A MeterStack on the Meta device calls it, so `oomguard run --device meta` and the
// GoogleTest layer under OOMGUARD_DEVICE=meta need nothing more; only a program that uses Meta
// tensors without them calls it itself. For the whole process it replaces LibTorch's Meta
// allocator, LibTorch's Meta resize_ and _fused_sdp_choice (after it, _fused_sdp_choice on
// Meta answers what the CPU would choose), and scaled_dot_product_attention on Meta tensors
// (AutogradMeta), which then calls the CPU's choice of kernel instead of the math path.
void use_meta_device();

// Ends the work at hand: `op` ("aten::eq") would decide it from values, which the Meta device
// does not have (`why` says what). Throws c10::NotImplementedError whose message names `op`
// and says data-dependent, which refused_operator() recognises.
[[noreturn]] void refuse_values(const std::string& op, const std::string& why);

// Construction on the Meta device: while a MakeOnMeta lives, on its thread, a tensor factory
// given no device (torch::empty, zeros, ones, randn, rand, full, arange, eye, scalar_tensor,
// ..., as torch::nn's constructors call them) makes a Meta tensor, so a model is made with no
// parameter ever on the CPU, at any size:
//     auto model = [] { oomguard::meta::MakeOnMeta on_meta; return Net(options); }();
// The GoogleTest layer's make_on_device() (<oomguard/gtest.h>) does this on Meta and makes the
// model as before elsewhere. The guards nest; each must end on the thread that made it, the
// innermost first. It calls use_meta_device().
// - A factory given a device keeps it (TensorOptions().device(torch::kCPU) stays on the CPU).
//   An operator on tensors is untouched, *_like factories too (their input's device).
// - torch::nn::init runs as on any Meta tensor: the in-place initialisers (uniform_, normal_,
//   kaiming_*, xavier_*, constant_, zeros_, ones_, eye_, dirac_) change nothing, and
//   orthogonal_'s random matrix and its QR are made on Meta too. sparse_ is refused by
//   randperm, naming it.
// - torch::tensor: its scalar form (torch::tensor(3), BatchNorm's num_batches_tracked) goes
//   through scalar_tensor with no device and is made on Meta; its list form
//   (torch::tensor({1, 2, 3})) is filled on the CPU and stays there, until to(device) moves it.
// - Every tensor made under the guard is counted as the card's, as the CPU path counts every
//   CPU tensor, those a real run keeps on the CPU too: a tensor the model holds but not as a
//   parameter or buffer is never moved to the card by to(device). TransformerEncoder and
//   TransformerDecoder are the case in torch::nn: their options keep the layer they were
//   given, a template the layers are cloned from, so one layer's parameters more are counted
//   than a GPU run holds (on the CPU path too).
// Implemented by a fallback at the dispatch key DeferredInit (harness/meta/make_on_meta.cpp),
// torchdistx's key: a program that also loads torchdistx cannot use both.
class MakeOnMeta {
 public:
  MakeOnMeta();
  ~MakeOnMeta();
  MakeOnMeta(const MakeOnMeta&) = delete;
  MakeOnMeta& operator=(const MakeOnMeta&) = delete;

 private:
  bool was_included_ = false;  // the thread's DeferredInit key before this guard
};

// The operator a LibTorch error says has no Meta kernel or cannot run without values
// ("aten::nonzero"), or "" when `error` is not such a refusal.
std::string refused_operator(const std::exception& error);

}  // namespace oomguard::meta
