// LibTorch's CPU kernels where the CPU stands for a card under CUDA autocast
// (harness/amp/stand_in.h): what the card's kernel allocates is counted, not the CPU's way to it.
//
// - Matrix products in fp16 and bf16 (mm, addmm, bmm, baddbmm): the CPU's fp16 GEMM is a plain
//   loop (40x slower than fp32 here), and its fp16 and bf16 GEMMs make fp32 buffers a card's
//   cuBLAS does not. They are computed through fp32, uncounted, as tensor cores accumulate in
//   fp32, into the counted output of the card's dtype.
// - add, sub, mul, div of an fp16 or bf16 tensor and an fp32 one (a residual stream, a bias
//   added in place): on the CPU, TensorIterator makes fp32 copies of the operands (and of an
//   in-place output) to compute in; a card's kernel casts as it reads. The kernel runs
//   uncounted and its output is counted (count_as_made_now).
// Any other call goes to LibTorch's own CPU kernel (at::cpu::), unchanged.
#include <initializer_list>
#include <string>
#include <string>

#include <ATen/ATen.h>
#include <ATen/ops/add_cpu_dispatch.h>
#include <ATen/ops/addmm_cpu_dispatch.h>
#include <ATen/ops/baddbmm_cpu_dispatch.h>
#include <ATen/ops/bmm_cpu_dispatch.h>
#include <ATen/ops/div_cpu_dispatch.h>
#include <ATen/ops/mm_cpu_dispatch.h>
#include <ATen/ops/mul_cpu_dispatch.h>
#include <ATen/ops/sub_cpu_dispatch.h>
#include <c10/util/Exception.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include "harness/amp/stand_in.h"

namespace oomguard::amp {
namespace {

bool reduced(at::ScalarType dtype) {
  return dtype == at::kHalf || dtype == at::kBFloat16;
}

// All operands CPU tensors of one reduced dtype, on the CPU stand-in.
bool reduced_products(std::initializer_list<const at::Tensor*> operands) {
  if (stand_in() != c10::DeviceType::CPU || !emulating_here())
    return false;
  const at::ScalarType dtype = (*operands.begin())->scalar_type();
  if (!reduced(dtype))
    return false;
  for (const at::Tensor* t : operands)
    if (!t->defined() || !t->is_cpu() || t->scalar_type() != dtype)
      return false;
  return true;
}

template <class Compute>
at::Tensor through_fp32(const at::Tensor& like, at::IntArrayRef sizes, Compute compute) {
  at::Tensor out = at::empty(sizes, like.options());  // the card's output, counted
  Uncounted uncounted;
  out.copy_(compute());
  return out;
}

at::Tensor mm(const at::Tensor& self, const at::Tensor& mat2) {
  if (!reduced_products({&self, &mat2}))
    return at::cpu::mm(self, mat2);
  return through_fp32(self, {self.size(0), mat2.size(1)}, [&] {
    return at::cpu::mm(self.to(at::kFloat), mat2.to(at::kFloat));
  });
}

at::Tensor addmm(
    const at::Tensor& self,
    const at::Tensor& mat1,
    const at::Tensor& mat2,
    const at::Scalar& beta,
    const at::Scalar& alpha) {
  if (!reduced_products({&mat1, &mat2, &self}))
    return at::cpu::addmm(self, mat1, mat2, beta, alpha);
  return through_fp32(mat1, {mat1.size(0), mat2.size(1)}, [&] {
    return at::cpu::addmm(
        self.to(at::kFloat), mat1.to(at::kFloat), mat2.to(at::kFloat), beta, alpha);
  });
}

at::Tensor bmm(const at::Tensor& self, const at::Tensor& mat2) {
  if (!reduced_products({&self, &mat2}))
    return at::cpu::bmm(self, mat2);
  return through_fp32(self, {self.size(0), self.size(1), mat2.size(2)}, [&] {
    return at::cpu::bmm(self.to(at::kFloat), mat2.to(at::kFloat));
  });
}

at::Tensor baddbmm(
    const at::Tensor& self,
    const at::Tensor& batch1,
    const at::Tensor& batch2,
    const at::Scalar& beta,
    const at::Scalar& alpha) {
  if (!reduced_products({&batch1, &batch2, &self}))
    return at::cpu::baddbmm(self, batch1, batch2, beta, alpha);
  return through_fp32(batch1, {batch1.size(0), batch1.size(1), batch2.size(2)}, [&] {
    return at::cpu::baddbmm(
        self.to(at::kFloat), batch1.to(at::kFloat), batch2.to(at::kFloat), beta, alpha);
  });
}

// Two floating CPU operands of different dtypes, one of them reduced, on the CPU stand-in.
bool mixed(const at::Tensor& a, const at::Tensor& b) {
  return stand_in() == c10::DeviceType::CPU && emulating_here() && a.is_cpu() && b.is_cpu() &&
         a.is_floating_point() && b.is_floating_point() && a.scalar_type() != b.scalar_type() &&
         (reduced(a.scalar_type()) || reduced(b.scalar_type()));
}

// `compute` uncounted, then its (new) output counted as if made at its end (unless the caller
// counts nothing itself: then it stays uncounted).
template <class Compute>
at::Tensor output_alone(Compute compute) {
  at::Tensor out;
  {
    Uncounted uncounted;
    out = compute();
  }
  count_as_made_now(out);
  return out;
}

// The binary kernels, LibTorch's CPU kernel given as `Kernel`: with an alpha (add, sub) or
// without (mul, div), out of place or in place.
using WithAlpha = at::Tensor (*)(const at::Tensor&, const at::Tensor&, const at::Scalar&);
using WithAlphaInPlace = at::Tensor& (*)(at::Tensor&, const at::Tensor&, const at::Scalar&);
using Plain = at::Tensor (*)(const at::Tensor&, const at::Tensor&);
using PlainInPlace = at::Tensor& (*)(at::Tensor&, const at::Tensor&);

template <WithAlpha Kernel>
at::Tensor with_alpha(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  if (!mixed(self, other))
    return Kernel(self, other, alpha);
  return output_alone([&] { return Kernel(self, other, alpha); });
}

template <WithAlphaInPlace Kernel>
at::Tensor& with_alpha_(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  if (!mixed(self, other))
    return Kernel(self, other, alpha);
  Uncounted uncounted;  // an in-place output is not new: its fp32 copy is the CPU's alone
  return Kernel(self, other, alpha);
}

template <Plain Kernel>
at::Tensor plain(const at::Tensor& self, const at::Tensor& other) {
  if (!mixed(self, other))
    return Kernel(self, other);
  return output_alone([&] { return Kernel(self, other); });
}

template <PlainInPlace Kernel>
at::Tensor& plain_(at::Tensor& self, const at::Tensor& other) {
  if (!mixed(self, other))
    return Kernel(self, other);
  Uncounted uncounted;
  return Kernel(self, other);
}

// LibTorch warns that these registrations override its own CPU kernels, on every CPU-path run;
// the override is the point (harness/amp/stand_in.h says why), so that one warning is dropped
// while they are registered, any other passed on.
class DropOverrideWarning : public c10::WarningHandler {
 public:
  explicit DropOverrideWarning(c10::WarningHandler* next) : next_(next) {}
  void process(const c10::Warning& warning) override {
    if (warning.msg().find("Overriding a previously registered kernel") == std::string::npos)
      next_->process(warning);
  }

 private:
  c10::WarningHandler* next_;
};

}  // namespace

void register_cpu_kernels() {
  DropOverrideWarning drop(c10::WarningUtils::get_warning_handler());
  c10::WarningUtils::WarningHandlerGuard guard(&drop);
  static auto* cpu =
      new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::CPU, __FILE__, __LINE__);
  cpu->impl("mm", TORCH_FN(mm));
  cpu->impl("addmm", TORCH_FN(addmm));
  cpu->impl("bmm", TORCH_FN(bmm));
  cpu->impl("baddbmm", TORCH_FN(baddbmm));
  cpu->impl("add.Tensor", TORCH_FN(with_alpha<&at::cpu::add>));
  cpu->impl("add_.Tensor", TORCH_FN(with_alpha_<&at::cpu::add_>));
  cpu->impl("sub.Tensor", TORCH_FN(with_alpha<&at::cpu::sub>));
  cpu->impl("sub_.Tensor", TORCH_FN(with_alpha_<&at::cpu::sub_>));
  cpu->impl("mul.Tensor", TORCH_FN(plain<&at::cpu::mul>));
  cpu->impl("mul_.Tensor", TORCH_FN(plain_<&at::cpu::mul_>));
  cpu->impl("div.Tensor", TORCH_FN((plain<static_cast<Plain>(&at::cpu::div)>)));
  cpu->impl("div_.Tensor", TORCH_FN((plain_<static_cast<PlainInPlace>(&at::cpu::div_)>)));
}

}  // namespace oomguard::amp
