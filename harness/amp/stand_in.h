#pragma once
// What the CUDA autocast emulation's files share (harness/amp/): the device whose tensors stand
// for the card's, and the CPU meter switched off for a scope.
#include <c10/core/DeviceType.h>

#include <oomguard/memory/tracking_allocator.h>

namespace oomguard::amp {

// The device emulate_cuda_autocast() was given: kCPU or kMeta.
c10::DeviceType stand_in();

// LibTorch's CPU kernels on the stand-in: fp16 and bf16 matrix products through fp32, and
// mixed-dtype elementwise arithmetic without the counted temporaries of TensorIterator's
// CPU promotion (harness/amp/cpu_kernels.cpp). Replaces those CPU kernels for the process
// (LibTorch warns once that it overrides them); every other call is LibTorch's own kernel.
void register_cpu_kernels();

// The CPU meter off for the scope, given back as it was: what a CPU kernel makes that the
// card's does not.
class Uncounted {
 public:
  Uncounted() : was_(memory::TrackingAllocator::instance().counting()) {
    memory::TrackingAllocator::instance().set_counting(false);
  }
  ~Uncounted() { memory::TrackingAllocator::instance().set_counting(was_); }
  Uncounted(const Uncounted&) = delete;
  Uncounted& operator=(const Uncounted&) = delete;

 private:
  bool was_;
};

}  // namespace oomguard::amp
