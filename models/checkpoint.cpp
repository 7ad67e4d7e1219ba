#include "models/checkpoint.h"

#include <mutex>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/grad_mode.h>

namespace oomguard::models {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// What backward needs besides the saved input; kept in the context as a capsule.
struct Recompute : torch::CustomClassHolder {
  BlockFn block;
  at::Tensor rng_state;  // the default CPU generator's state before the forward
};

at::Tensor cpu_rng_state() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void set_cpu_rng_state(const at::Tensor& state) {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

struct CheckpointFunction : torch::autograd::Function<CheckpointFunction> {
  // Runs with grad mode off (Function::apply sees to it): nothing inside is saved.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const BlockFn& block) {
    auto recompute = c10::make_intrusive<Recompute>();
    recompute->block = block;
    recompute->rng_state = cpu_rng_state();
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
    const at::Tensor now = cpu_rng_state();
    set_cpu_rng_state(recompute->rng_state);
    at::Tensor y;
    {
      torch::AutoGradMode enable_grad(true);
      y = recompute->block(input);
    }
    set_cpu_rng_state(now);
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
