#pragma once
// FusedAdamW: torch::optim::AdamW whose step is ATen's fused multi-tensor kernel
// (_fused_adamw_): one pass over each parameter, its gradient and both moments, instead of
// about ten tensor ops per parameter. Same update (decoupled weight decay, bias correction),
// same state sizes; amsgrad is not supported (checked).
#include <vector>

#include <torch/optim/adamw.h>

namespace oomguard::phases {

class FusedAdamW final : public torch::optim::AdamW {
 public:
  FusedAdamW(std::vector<torch::Tensor> params, const torch::optim::AdamWOptions& options);
  torch::Tensor step(LossClosure closure = nullptr) override;

 private:
  struct Moments {
    torch::Tensor exp_avg, exp_avg_sq, step;  // step: a float scalar tensor, as the kernel wants
  };
  std::vector<std::vector<Moments>> moments_;  // per group, per parameter
};

}  // namespace oomguard::phases
