#include "harness/phases/fused_adamw.h"

#include <ATen/ops/_foreach_add.h>
#include <ATen/ops/_fused_adamw.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/grad_mode.h>

namespace oomguard::phases {

FusedAdamW::FusedAdamW(std::vector<torch::Tensor> params, const torch::optim::AdamWOptions& options)
    : torch::optim::AdamW(std::move(params), options) {
  TORCH_CHECK(!options.amsgrad(), "FusedAdamW: amsgrad is not supported; use torch::optim::AdamW");
}

torch::Tensor FusedAdamW::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure != nullptr) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  moments_.resize(param_groups().size());
  for (size_t g = 0; g < param_groups().size(); ++g) {
    auto& group = param_groups()[g];
    const auto& options = static_cast<const torch::optim::AdamWOptions&>(group.options());
    auto& moments = moments_[g];
    moments.resize(group.params().size());
    std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs, steps;
    for (size_t i = 0; i < group.params().size(); ++i) {
      const torch::Tensor& p = group.params()[i];
      if (!p.grad().defined())
        continue;
      Moments& m = moments[i];
      if (!m.step.defined()) {  // lazily, as AdamW allocates its state at the first step
        m.exp_avg = at::zeros_like(p, at::MemoryFormat::Preserve);
        m.exp_avg_sq = at::zeros_like(p, at::MemoryFormat::Preserve);
        m.step = at::zeros({}, p.options().dtype(at::kFloat));
      }
      params.push_back(p);
      grads.push_back(p.grad());
      exp_avgs.push_back(m.exp_avg);
      exp_avg_sqs.push_back(m.exp_avg_sq);
      steps.push_back(m.step);
    }
    if (params.empty())
      continue;
    at::_foreach_add_(steps, 1.0);  // the kernel reads the step count after this update
    at::_fused_adamw_(
        params,
        grads,
        exp_avgs,
        exp_avg_sqs,
        /*max_exp_avg_sqs=*/{},
        steps,
        options.lr(),
        std::get<0>(options.betas()),
        std::get<1>(options.betas()),
        options.weight_decay(),
        options.eps(),
        /*amsgrad=*/false,
        /*maximize=*/false);
  }
  return loss;
}

}  // namespace oomguard::phases
