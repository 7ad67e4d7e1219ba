#include <oomguard/models/checkpoint.h>

#include <mutex>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/autocast_mode.h>
#include <ATen/Context.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/grad_mode.h>

namespace oomguard::models {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// CUDA autocast as a thread has it: the recompute runs in the forward's, as the forward ran
// (a backward normally runs with autocast off), whether on a card or where oomguard stands
// for one (<oomguard/amp/cuda_autocast.h>).
struct AutocastState {
  bool enabled = false;
  at::ScalarType dtype = at::kHalf;
  bool cache = true;

  static AutocastState now() {
    return {
        at::autocast::is_autocast_enabled(at::kCUDA),
        at::autocast::get_autocast_dtype(at::kCUDA),
        at::autocast::is_autocast_cache_enabled()};
  }
  void apply() const {
    at::autocast::set_autocast_enabled(at::kCUDA, enabled);
    at::autocast::set_autocast_dtype(at::kCUDA, dtype);
    at::autocast::set_autocast_cache_enabled(cache);
  }
};

// The recompute as an autocast region in `state`, as torch.utils.checkpoint enters
// torch.autocast: the thread's state given back after, and the cast cache cleared when no
// region encloses it (its weight casts then live as long as the recompute's graph, not until
// the next step's clear_cache()).
class RecomputeRegion {
 public:
  explicit RecomputeRegion(const AutocastState& state) : was_(AutocastState::now()) {
    state.apply();
    at::autocast::increment_nesting();
  }
  ~RecomputeRegion() {
    if (at::autocast::decrement_nesting() == 0)
      at::autocast::clear_cache();
    was_.apply();
  }
  RecomputeRegion(const RecomputeRegion&) = delete;
  RecomputeRegion& operator=(const RecomputeRegion&) = delete;

 private:
  AutocastState was_;
};

// What backward needs besides the saved input; kept in the context as a capsule.
struct Recompute : torch::CustomClassHolder {
  BlockFn block;
  c10::Device device = c10::kCPU;  // whose default generator draws the block's dropout
  at::Tensor rng_state;            // that generator's state before the forward
  AutocastState autocast;          // the forward's
};

// The default generator of `device`: dropout on a CUDA tensor draws from the device's own.
// The Meta device has none and draws nothing: the CPU's is kept and given back, unchanged.
at::Generator default_generator(c10::Device device) {
  return device.is_cpu() || device.is_meta() ? at::detail::getDefaultCPUGenerator()
                                             : at::globalContext().defaultGenerator(device);
}

at::Tensor rng_state(c10::Device device) {
  auto gen = default_generator(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void set_rng_state(c10::Device device, const at::Tensor& state) {
  auto gen = default_generator(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

struct CheckpointFunction : torch::autograd::Function<CheckpointFunction> {
  // Runs with grad mode off (Function::apply sees to it): nothing inside is saved.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const BlockFn& block) {
    auto recompute = c10::make_intrusive<Recompute>();
    recompute->block = block;
    recompute->device = x.device();
    recompute->rng_state = rng_state(x.device());
    recompute->autocast = AutocastState::now();
    ctx->saved_data["recompute"] = c10::IValue::make_capsule(recompute);
    ctx->save_for_backward({x});
    return block(x);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto recompute =
        c10::static_intrusive_pointer_cast<Recompute>(ctx->saved_data.at("recompute").toCapsule());
    const at::Tensor x = ctx->get_saved_variables().at(0);
    const at::Tensor input = x.detach().requires_grad_(x.requires_grad());
    // Replay the forward's random draws, then give the generator back its present state.
    const at::Tensor now = rng_state(recompute->device);
    set_rng_state(recompute->device, recompute->rng_state);
    at::Tensor y;
    {
      RecomputeRegion region(recompute->autocast);
      torch::AutoGradMode enable_grad(true);
      y = recompute->block(input);
    }
    set_rng_state(recompute->device, now);
    // Reentrant backward: parameter gradients accumulate into .grad as usual; the input's
    // gradient goes back to the outer graph.
    torch::autograd::backward({y}, {grad_outputs.at(0)});
    return {input.requires_grad() ? input.grad() : at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor checkpoint(const BlockFn& block, const at::Tensor& x) {
  if (!torch::GradMode::is_enabled()) {
    return block(x);
  }
  return CheckpointFunction::apply(x, block);
}

}  // namespace oomguard::models
