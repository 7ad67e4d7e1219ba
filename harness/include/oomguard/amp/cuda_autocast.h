#pragma once
// CUDA autocast where oomguard stands for a card: on the CPU path and on the Meta device, a
// program's CUDA autocast (at::autocast::set_autocast_enabled(at::kCUDA, true), fp16 or bf16)
// acts on the tensors that stand for the card's as it acts on CUDA tensors, so the sizes and
// dtypes of everything allocated are the card's. LibTorch alone never casts a CPU or Meta
// tensor for CUDA autocast: its kernels at DispatchKey::AutocastCUDA take CUDA tensors only.
//
// The policy is the one of the LibTorch being built against, read from its op lists
// (ATen/autocast_mode.h: AT_FORALL_LOWER_PRECISION_FP, AT_FORALL_FP32,
// AT_FORALL_FP32_SET_OPT_DTYPE, AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE, AT_FORALL_PROMOTE)
// and what autocast_mode.cpp registers beside them (cudnn_convolution and its transpose in
// low precision, binary_cross_entropy refused as unsafe), with the cast cache: the low-precision
// copy of an fp32 leaf that requires grad (a weight, a bias) is kept and reused until
// at::autocast::clear_cache(). Only cuDNN's RNN weight flattening (aten::_cudnn_rnn, a
// CUDA-only kernel) is not emulated.
//
// Where a card and the stand-in differ inside a kernel, the card's bytes are what is counted:
// - softmax and log_softmax of an fp16 tensor into fp32 (what the fp32 policy asks of them) read
//   the fp16 input directly on the card; the CPU and Meta kernels would first make an fp32
//   copy of it. On Meta the card's kernel runs (_softmax with half_to_float); on the CPU, which
//   has no such kernel, the fp32 copy is made uncounted.
// - Values on the CPU path are computed by the CPU's own fp16 and bf16 kernels: slower than
//   fp32, and their results are those of the CPU, not bit for bit the card's.
//
// - On the CPU path, fp16 and bf16 matrix products and mixed-dtype add, sub, mul and div count
//   the card's bytes, not the CPU kernels' fp32 buffers (harness/amp/cpu_kernels.cpp).
//
// It is switched on by the meter (memory::MeterStack on the CPU or Meta device), for the
// thread that built the meter, until the stack is destroyed; autograd's backward inherits it.
// Another thread that runs the model calls emulate_cuda_autocast_on_this_thread(). The cast
// cache is one for the process, as PyTorch's. It is not a CPU-to-GPU rule: OOMGUARD_RULES=none
// leaves it on, as the casts are the program's own. With CUDA autocast off no operator is cast
// and an fp32 run's every byte is as before. Implemented at the dispatch key AutocastXLA,
// which LibTorch leaves empty; a program that also loads torch_xla cannot use it.
// harness/amp/README.md has the figures against PyTorch's own.
#include <cstdint>
#include <optional>

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

namespace oomguard::amp {

// A CUDA autocast region, as Python's `with torch.autocast("cuda", dtype)` makes one: CUDA
// autocast on at `dtype` (kHalf or kBFloat16) for the guard's life, the previous state given
// back after, and the cast cache cleared when the outermost region ends. std::nullopt: a
// region that changes nothing (fp32). It works the same on a card and where oomguard stands
// for one.
class CudaAutocast {
 public:
  explicit CudaAutocast(std::optional<c10::ScalarType> dtype);
  ~CudaAutocast();
  CudaAutocast(const CudaAutocast&) = delete;
  CudaAutocast& operator=(const CudaAutocast&) = delete;

 private:
  bool on_ = false;
  bool was_enabled_ = false;
  c10::ScalarType was_dtype_ = c10::ScalarType::Half;
};

// Registers the emulation (once per process) and switches it on for the calling thread, for
// tensors on `stand_in` (kCPU or kMeta): those, when floating point and not double, are cast
// as CUDA tensors would be. A later call with another device changes it for the process.
void emulate_cuda_autocast(c10::DeviceType stand_in);

// Switches the emulation on for the calling thread too, with the device emulate_cuda_autocast()
// was given; does nothing before it was called.
void emulate_cuda_autocast_on_this_thread();

// Ends one emulate_cuda_autocast*() call of the calling thread; once all have ended, its
// tensors are no longer cast (a MeterStack ends its own when destroyed).
void end_cuda_autocast_emulation();

// Whether CUDA autocast acts on this thread's tensors on the stand-in device: the emulation is
// on for the thread and the program turned CUDA autocast on (false inside an operator the
// emulation is casting for, as is_autocast_enabled() there).
bool cuda_autocast_emulated();

// The low-precision copies the cast cache holds (weights and biases cast once per autocast
// region), 0 after at::autocast::clear_cache().
int64_t cached_casts();

}  // namespace oomguard::amp
