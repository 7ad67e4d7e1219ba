#pragma once
// What the CUDA autocast emulation's files share (harness/amp/): the device whose tensors stand
// for the card's, and the CPU meter switched off for a scope.
#include <ATen/core/Tensor.h>
#include <c10/core/DeviceType.h>

#include <oomguard/memory/tracking_allocator.h>

namespace oomguard::amp {

// The device emulate_cuda_autocast() was given: kCPU or kMeta.
c10::DeviceType stand_in();
// Whether the emulation is on for the calling thread (emulate_cuda_autocast() there, or
// emulate_cuda_autocast_on_this_thread(), and not ended since), CUDA autocast on or off.
bool emulating_here();

// LibTorch's CPU kernels on the stand-in: fp16 and bf16 matrix products through fp32, and
// mixed-dtype elementwise arithmetic without the counted temporaries of TensorIterator's
// CPU promotion (harness/amp/cpu_kernels.cpp), on a thread where the CPU path emulates.
// Replaces those CPU kernels for the process; every other call, any other thread's, and every
// fp32 one, is LibTorch's own kernel.
void register_cpu_kernels();

// This thread's allocations uncounted for the scope: what a CPU kernel makes that the card's
// does not.
using Uncounted = memory::TrackingAllocator::UncountedHere;

// A tensor a kernel made inside an Uncounted scope, counted from now on as if made now: the
// kernel's output is the card's, its scratch was not (TrackingAllocator::count_now; nothing
// when the caller counts nothing itself).
inline void count_as_made_now(const at::Tensor& t) {
  if (t.defined() && t.has_storage())
    memory::TrackingAllocator::instance().count_now(t.storage().data_ptr());
}

}  // namespace oomguard::amp
