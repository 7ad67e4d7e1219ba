// CUDA autocast on the tensors that stand for the card's (<oomguard/amp/cuda_autocast.h>).
//
// The key AutocastXLA is put in the thread's included dispatch keys (and taken out of the
// excluded ones, where every autocast key starts). It sits where AutocastCUDA does, above
// autograd, so the casts are recorded by autograd and the low-precision inputs are what a
// backward keeps. Every operator falls through it but those of CUDA's autocast lists, which
// come to one boxed kernel: it looks up the operator's policy, casts the arguments, and calls
// the operator again with the key excluded, as PyTorch's own wrappers do (a full call, so the
// operator's callbacks see the cast inputs too).
#include <oomguard/amp/cuda_autocast.h>

#include <atomic>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include <ATen/CachedTensorUtils.h>
#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <c10/core/InferenceMode.h>
#include <c10/core/GradMode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <oomguard/memory/tracking_allocator.h>
#include "harness/amp/stand_in.h"

namespace oomguard::amp {
namespace {

constexpr c10::DispatchKey kKey = c10::DispatchKey::AutocastXLA;

enum class Policy {
  kLowerPrecision,   // every floating argument to the autocast dtype
  kFp32,             // every floating argument to fp32
  kFp32SetOptDtype,  // an unset `dtype` becomes fp32 when the first argument is eligible
  kFp32AppendDtype,  // the overload with a dtype, fp32 when the first argument is eligible
  kPromote,          // the widest floating type among the arguments
  kBanned,           // unsafe to autocast: refused
};

struct Entry {
  const char* name;  // "aten::op" or "aten::op.overload"
  Policy policy;
};

#define OOMGUARD_OPNAME1(OP) "aten::" #OP
#define OOMGUARD_OPNAME2(OP, OVERLOAD) "aten::" #OP "." #OVERLOAD
#define OOMGUARD_NARG_IMPL(_1, _2, N, ...) N
#define OOMGUARD_NARG(...) OOMGUARD_NARG_IMPL(__VA_ARGS__, 2, 1)
#define OOMGUARD_OPNAME(...) \
  C10_CONCATENATE(OOMGUARD_OPNAME, OOMGUARD_NARG(__VA_ARGS__))(__VA_ARGS__)
#define OOMGUARD_LOWER(...) {OOMGUARD_OPNAME(__VA_ARGS__), Policy::kLowerPrecision},
#define OOMGUARD_FP32(...) {OOMGUARD_OPNAME(__VA_ARGS__), Policy::kFp32},
#define OOMGUARD_SET_OPT(...) {OOMGUARD_OPNAME(__VA_ARGS__), Policy::kFp32SetOptDtype},
#define OOMGUARD_PROMOTE(...) {OOMGUARD_OPNAME(__VA_ARGS__), Policy::kPromote},
#define OOMGUARD_APPEND(FUNC, NAME, REGISTERED, REDISPATCHED, POLICY) \
  {"aten::" NAME, Policy::kFp32AppendDtype},

// CUDA's policy as the LibTorch built against lists it, and what autocast_mode.cpp registers
// at AutocastCUDA beside the lists.
const Entry kPolicy[] = {
    AT_FORALL_LOWER_PRECISION_FP(OOMGUARD_LOWER)               //
    AT_FORALL_FP32(OOMGUARD_FP32)                              //
    AT_FORALL_FP32_SET_OPT_DTYPE(OOMGUARD_SET_OPT)             //
    AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(OOMGUARD_APPEND)  //
    AT_FORALL_PROMOTE(OOMGUARD_PROMOTE)                        //
    {"aten::cudnn_convolution", Policy::kLowerPrecision},
    {"aten::cudnn_convolution_transpose", Policy::kLowerPrecision},
    {"aten::binary_cross_entropy", Policy::kBanned},
    {"aten::linalg_matrix_sqrth", Policy::kFp32},  // registered by name where it exists
};

#undef OOMGUARD_APPEND
#undef OOMGUARD_PROMOTE
#undef OOMGUARD_SET_OPT
#undef OOMGUARD_FP32
#undef OOMGUARD_LOWER
#undef OOMGUARD_OPNAME
#undef OOMGUARD_NARG
#undef OOMGUARD_NARG_IMPL
#undef OOMGUARD_OPNAME2
#undef OOMGUARD_OPNAME1

// The overload with a dtype that fp32_append_dtype calls instead of the one called.
const char* with_dtype(const std::string& overload) {
  if (overload == "Scalar")
    return "ScalarOpt_dtype";
  if (overload == "ScalarOpt_dim")
    return "ScalarOpt_dim_dtype";
  if (overload == "names_ScalarOpt_dim")
    return "names_ScalarOpt_dim_dtype";
  return nullptr;
}

struct Registered {
  Policy policy;
  std::optional<c10::OperatorHandle> append_to;  // kFp32AppendDtype's overload with a dtype
};

std::unordered_map<c10::OperatorName, Registered>& registered() {
  static auto* table = new std::unordered_map<c10::OperatorName, Registered>();
  return *table;
}

std::atomic<int> g_stand_in{static_cast<int>(c10::DeviceType::CPU)};
std::atomic<bool> g_registered{false};

}  // namespace

c10::DeviceType stand_in() {
  return static_cast<c10::DeviceType>(g_stand_in.load(std::memory_order_relaxed));
}

namespace {

bool eligible(const at::Tensor& t) {
  return t.defined() && t.device().type() == stand_in() && t.is_floating_point() &&
         t.scalar_type() != at::kDouble;
}

// ---- The cast cache: PyTorch's rule and, as PyTorch's, one for the process ------------------

using WeakImpl = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;
using Casts = std::unordered_map<c10::TensorImpl*, std::pair<WeakImpl, at::Tensor>>;

struct CastCache {
  std::recursive_mutex mutex;  // recursive: a cast allocates, and allocating checks the cache
  Casts casts;
  // A cast of `source` held by PyTorch's own cache alone: expired once clear_cache() ran.
  at::Tensor source;
  std::optional<WeakImpl> sentinel;
  std::atomic<bool> holds{false};  // casts is not empty: what an allocation checks first
};

CastCache& cache() {
  static auto* c = new CastCache();  // never destroyed: allocations may come at exit
  return *c;
}

// Puts a cast of a one-element CPU leaf into PyTorch's own cache (at::autocast::cached_cast on
// the CPU device caches without CPU autocast on), uncounted: its expiry tells of clear_cache().
// False when PyTorch would not cache it (inference mode, its cache off, a CPU autocast dtype of
// fp32): then nothing may be cached here either, or it would outlive clear_cache().
bool arm_sentinel(CastCache& c) {
  if (c.sentinel && !c.sentinel->expired())
    return true;
  const at::ScalarType cpu_dtype = at::autocast::get_autocast_dtype(at::kCPU);
  if (cpu_dtype == at::kFloat || c10::InferenceMode::is_enabled())
    return false;
  Uncounted uncounted;
  if (!c.source.defined())
    c.source = at::empty({1}, at::TensorOptions().dtype(at::kFloat)).requires_grad_(true);
  at::Tensor cast = at::autocast::cached_cast(cpu_dtype, c.source, c10::DeviceType::CPU);
  if (!at::caching::is_cached_tensor(c.source) &&
      cast.unsafeGetTensorImpl() != c.source.unsafeGetTensorImpl())
    c.sentinel = WeakImpl(cast.getIntrusivePtr());
  return c.sentinel && !c.sentinel->expired();
}

// Drops the cached casts once PyTorch's clear_cache() has run. Called before every counted
// allocation and every read of the meter, so the release lands before the next byte is
// counted or read.
void forget_if_cleared() {
  CastCache& c = cache();
  if (!c.holds.load(std::memory_order_acquire))
    return;
  Casts dropped;  // released after the lock
  {
    std::lock_guard<std::recursive_mutex> lock(c.mutex);
    if (!c.sentinel || !c.sentinel->expired())
      return;
    c.sentinel.reset();
    dropped.swap(c.casts);
    c.holds.store(false, std::memory_order_release);
  }
}

at::Tensor cached_cast(const at::Tensor& arg, at::ScalarType to) {
  if (!eligible(arg) || arg.scalar_type() == to)
    return arg;
  const bool can_cache = to == at::autocast::get_autocast_dtype(at::kCUDA) &&
                         arg.scalar_type() == at::kFloat && arg.requires_grad() && arg.is_leaf() &&
                         !arg.is_view() && at::autocast::is_autocast_cache_enabled() &&
                         !c10::InferenceMode::is_enabled() && !at::caching::is_cached_tensor(arg);
  if (!can_cache)
    return arg.to(to);
  CastCache& c = cache();
  forget_if_cleared();
  {
    std::lock_guard<std::recursive_mutex> lock(c.mutex);
    auto found = c.casts.find(arg.unsafeGetTensorImpl());
    if (found != c.casts.end())
      return found->second.second;
  }
  at::Tensor cast;
  {
    // As PyTorch: the copy that is kept carries its gradient even when first made without one.
    at::AutoGradMode grad(true);
    cast = arg.to(to);
  }
  std::lock_guard<std::recursive_mutex> lock(c.mutex);
  if (!arm_sentinel(c))
    return cast;  // clear_cache() could not be seen: not kept
  const auto made = c.casts.emplace(
      arg.unsafeGetTensorImpl(), std::make_pair(WeakImpl(arg.getIntrusivePtr()), cast));
  c.holds.store(true, std::memory_order_release);
  return made.first->second.second;  // another thread's, where it cast the same meanwhile
}

// ---- The policies, on the boxed arguments ---------------------------------------------------

void cast_value(c10::IValue& value, at::ScalarType to) {
  if (value.isTensor()) {
    value = cached_cast(value.toTensor(), to);
  } else if (value.isTensorList()) {
    c10::List<at::Tensor> list = value.toTensorList();
    c10::List<at::Tensor> cast;
    cast.reserve(list.size());
    for (const at::Tensor& t : list)
      cast.push_back(cached_cast(t, to));
    value = std::move(cast);
  }
}

// The widest floating type of the eligible tensors, starting from the autocast dtype: fp32
// wins over low precision, double is ignored (PyTorch's prioritize()).
at::ScalarType promoted(c10::ArrayRef<c10::IValue> args) {
  const at::ScalarType low = at::autocast::get_autocast_dtype(at::kCUDA);
  at::ScalarType to = low;
  const auto widen = [&to, low](const at::Tensor& t) {
    if (!eligible(t) || to == at::kFloat)
      return;
    if (t.scalar_type() == at::kFloat)
      to = at::kFloat;
    else
      TORCH_CHECK(
          t.scalar_type() == low,
          "Unexpected floating ScalarType in at::autocast::prioritize: ",
          t.scalar_type(),
          " beside the autocast dtype ",
          low);
  };
  for (const c10::IValue& value : args) {
    if (value.isTensor())
      widen(value.toTensor());
    else if (value.isTensorList())
      for (const at::Tensor& t : value.toTensorList())
        widen(t);
  }
  return to;
}

bool first_eligible(c10::ArrayRef<c10::IValue> args) {
  return !args.empty() && args[0].isTensor() && eligible(args[0].toTensor());
}

bool touches_stand_in(c10::ArrayRef<c10::IValue> args) {
  for (const c10::IValue& value : args)
    if (value.isTensor() && value.toTensor().defined() &&
        value.toTensor().device().type() == stand_in())
      return true;
  return false;
}

[[noreturn]] void refuse_banned(const c10::OperatorHandle& op) {
  TORCH_CHECK(
      false,
      op.schema().name(),
      " is unsafe to autocast: its fp16 input loses the precision a probability needs. Under "
      "CUDA autocast use binary_cross_entropy_with_logits (torch::nn::BCEWithLogitsLoss), which "
      "takes the logits before the sigmoid and is safe, or compute the loss in fp32 outside the "
      "autocast region.");
}

// softmax / log_softmax of an fp16 tensor into fp32: the card's kernel reads fp16 directly
// (_softmax with half_to_float); the stand-in's would make an fp32 copy first. True when it
// was computed here, its result pushed.
// softmax / log_softmax of an fp16 tensor into fp32 on the CPU, as the card computes it: the
// CPU has no half_to_float kernel, forward or backward, so each runs through fp32 copies that
// are not counted; counted are the fp32 output (kept for the backward, as the card keeps it)
// and the fp16 gradient of the input.
struct CpuHalfToFloatSoftmax : torch::autograd::Function<CpuHalfToFloatSoftmax> {
  static at::Tensor forward(
      torch::autograd::AutogradContext* ctx, const at::Tensor& input, int64_t dim, bool log) {
    at::Tensor wide;
    {
      Uncounted uncounted;
      wide = input.to(at::kFloat);
    }
    at::Tensor result = log ? at::_log_softmax(wide, dim, false) : at::_softmax(wide, dim, false);
    ctx->saved_data["dim"] = dim;
    ctx->saved_data["log"] = log;
    ctx->save_for_backward({result});
    return result;
  }

  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const at::Tensor result = ctx->get_saved_variables().at(0);
    const int64_t dim = ctx->saved_data.at("dim").toInt();
    const bool log = ctx->saved_data.at("log").toBool();
    at::Tensor wide;
    {
      Uncounted uncounted;
      wide = log ? at::_log_softmax_backward_data(grads.at(0), result, dim, at::kFloat)
                 : at::_softmax_backward_data(grads.at(0), result, dim, at::kFloat);
    }
    return {wide.to(at::kHalf), at::Tensor(), at::Tensor()};
  }
};

bool half_to_float_softmax(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const std::string& name = op.schema().name();
  const bool log = name == "aten::log_softmax";
  if ((!log && name != "aten::softmax") || op.schema().overload_name() != "int")
    return false;
  const size_t first = stack->size() - 3;
  const at::Tensor input = (*stack)[first].toTensor();
  const auto dtype = (*stack)[first + 2].toOptional<at::ScalarType>();
  if (input.scalar_type() != at::kHalf || dtype != at::kFloat)
    return false;
  const int64_t dim = (*stack)[first + 1].toInt();
  at::Tensor result;
  if (stand_in() == c10::DeviceType::Meta) {
    result = log ? at::_log_softmax(input, dim, true) : at::_softmax(input, dim, true);
  } else {
    result = CpuHalfToFloatSoftmax::apply(input, dim, log);
  }
  torch::jit::drop(*stack, 3);
  torch::jit::push(*stack, std::move(result));
  return true;
}

// A convolution in low precision on the CPU: the CPU's fp16 kernel (slow_conv2d, where oneDNN
// has none) makes column buffers that a card's cuDNN kernel does not. It runs uncounted, then
// its outputs are counted as if made then.
bool cpu_convolution(const c10::OperatorHandle& op) {
  return stand_in() == c10::DeviceType::CPU && op.schema().name().find("conv") != std::string::npos;
}

void call_counting_outputs(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  // The inputs (the casts among them) live until the outputs are counted, as a card's
  // kernel writes its outputs while its inputs live.
  const size_t count = op.schema().arguments().size();
  const std::vector<c10::IValue> inputs(
      stack->end() - static_cast<std::ptrdiff_t>(count), stack->end());
  {
    Uncounted uncounted;
    op.callBoxed(stack);
  }
  const size_t outputs = op.schema().returns().size();
  for (size_t i = stack->size() - outputs; i < stack->size(); ++i)
    if ((*stack)[i].isTensor())
      count_as_made_now((*stack)[i].toTensor());
}

void apply_policy(
    const c10::OperatorHandle& op, const Registered& entry, torch::jit::Stack* stack) {
  const size_t count = op.schema().arguments().size();
  const size_t first = stack->size() - count;
  c10::ArrayRef<c10::IValue> view(stack->data() + first, count);
  auto* args = stack->data() + first;
  switch (entry.policy) {
    case Policy::kLowerPrecision:
    case Policy::kFp32:
    case Policy::kPromote: {
      const at::ScalarType to = entry.policy == Policy::kFp32 ? at::kFloat
                                : entry.policy == Policy::kPromote
                                    ? promoted(view)
                                    : at::autocast::get_autocast_dtype(at::kCUDA);
      for (size_t i = 0; i < count; ++i)
        cast_value(args[i], to);
      if (entry.policy == Policy::kLowerPrecision && cpu_convolution(op))
        call_counting_outputs(op, stack);
      else
        op.callBoxed(stack);
      return;
    }
    case Policy::kFp32SetOptDtype: {
      if (first_eligible(view)) {
        for (size_t i = 0; i < count; ++i)
          if (op.schema().arguments()[i].name() == "dtype" && args[i].isNone())
            args[i] = c10::IValue(at::kFloat);
        if (half_to_float_softmax(op, stack))
          return;
      }
      op.callBoxed(stack);
      return;
    }
    case Policy::kFp32AppendDtype: {
      if (!touches_stand_in(view)) {  // AutocastCUDA would not be reached
        op.callBoxed(stack);
        return;
      }
      const at::ScalarType to =
          first_eligible(view) ? at::kFloat : args[0].toTensor().scalar_type();
      torch::jit::push(*stack, c10::IValue(to));
      entry.append_to->callBoxed(stack);
      return;
    }
    case Policy::kBanned:
      if (touches_stand_in(view))
        refuse_banned(op);
      op.callBoxed(stack);
      return;
  }
}

void autocast_kernel(
    const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  const bool on = at::autocast::is_autocast_enabled(at::kCUDA);
  if (!on) {
    c10::impl::ExcludeDispatchKeyGuard off(kKey);
    op.redispatchBoxed(keys & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, kKey), stack);
    return;
  }
  // Inside, as inside PyTorch's wrappers, CUDA autocast is off; CPU autocast never acts on
  // what stands for the card's tensors.
  c10::impl::ExcludeDispatchKeyGuard inside(
      c10::DispatchKeySet({kKey, c10::DispatchKey::AutocastCUDA, c10::DispatchKey::AutocastCPU}));
  auto found = registered().find(op.operator_name());
  TORCH_INTERNAL_ASSERT(found != registered().end(), op.operator_name(), " has no policy");
  apply_policy(op, found->second, stack);
}

void forget_before_allocating() {
  forget_if_cleared();
}

void register_emulation() {
  static auto* fallback = new torch::Library(torch::Library::IMPL, "_", kKey, __FILE__, __LINE__);
  fallback->fallback(torch::CppFunction::makeFallthrough());
  static auto* kernels = new torch::Library(torch::Library::IMPL, "aten", kKey, __FILE__, __LINE__);
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const Entry& entry : kPolicy) {
    const std::string full = entry.name;
    const auto dot = full.find('.');
    c10::OperatorName name{
        full.substr(0, dot), dot == std::string::npos ? "" : full.substr(dot + 1)};
    if (!dispatcher.findSchema(name))
      continue;  // an operator this LibTorch does not have (linalg_matrix_sqrth before 2.15)
    Registered reg{entry.policy, std::nullopt};
    if (entry.policy == Policy::kFp32AppendDtype) {
      const char* overload = with_dtype(name.overload_name);
      TORCH_INTERNAL_ASSERT(overload != nullptr, full, " has no overload with a dtype");
      reg.append_to = dispatcher.findSchemaOrThrow(name.name.c_str(), overload);
    }
    registered().emplace(name, std::move(reg));
    kernels->impl(full.c_str(), torch::CppFunction::makeFromBoxedFunction<&autocast_kernel>());
  }
  memory::TrackingAllocator::set_before_allocate(&forget_before_allocating);
}

thread_local int t_emulating = 0;  // emulate_cuda_autocast*() calls on this thread not ended

void include_key() {
  if (t_emulating++ > 0)
    return;
  c10::impl::tls_set_dispatch_key_excluded(kKey, false);
  c10::impl::tls_set_dispatch_key_included(kKey, true);
}

}  // namespace

CudaAutocast::CudaAutocast(std::optional<c10::ScalarType> dtype) : on_(dtype.has_value()) {
  if (!on_)
    return;
  TORCH_CHECK(
      *dtype == at::kHalf || *dtype == at::kBFloat16,
      "CUDA autocast runs in fp16 or bf16, not ",
      *dtype);
  was_enabled_ = at::autocast::is_autocast_enabled(at::kCUDA);
  was_dtype_ = at::autocast::get_autocast_dtype(at::kCUDA);
  at::autocast::set_autocast_dtype(at::kCUDA, *dtype);
  at::autocast::set_autocast_enabled(at::kCUDA, true);
  at::autocast::increment_nesting();
}

CudaAutocast::~CudaAutocast() {
  if (!on_)
    return;
  at::autocast::set_autocast_enabled(at::kCUDA, was_enabled_);
  at::autocast::set_autocast_dtype(at::kCUDA, was_dtype_);
  if (at::autocast::decrement_nesting() == 0)
    at::autocast::clear_cache();
}

void emulate_cuda_autocast(c10::DeviceType device) {
  TORCH_CHECK(
      device == c10::DeviceType::CPU || device == c10::DeviceType::Meta,
      "oomguard emulates CUDA autocast on CPU or Meta tensors, not on ",
      device);
  static std::once_flag once;
  std::call_once(once, register_emulation);
  if (device == c10::DeviceType::CPU) {
    static std::once_flag cpu_once;
    std::call_once(cpu_once, register_cpu_kernels);
  }
  g_stand_in.store(static_cast<int>(device));
  g_registered.store(true);
  include_key();
}

void emulate_cuda_autocast_on_this_thread() {
  if (g_registered.load())
    include_key();
}

void end_cuda_autocast_emulation() {
  if (t_emulating == 0 || --t_emulating > 0)
    return;
  c10::impl::tls_set_dispatch_key_included(kKey, false);
  c10::impl::tls_set_dispatch_key_excluded(kKey, true);
}

bool emulating_here() {
  return t_emulating > 0;
}

bool cuda_autocast_emulated() {
  return g_registered.load() && c10::impl::tls_is_dispatch_key_included(kKey) &&
         !c10::impl::tls_is_dispatch_key_excluded(kKey) &&
         at::autocast::is_autocast_enabled(at::kCUDA);
}

int64_t cached_casts() {
  forget_if_cleared();
  std::lock_guard<std::recursive_mutex> lock(cache().mutex);
  return static_cast<int64_t>(cache().casts.size());
}

}  // namespace oomguard::amp
