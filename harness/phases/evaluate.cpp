#include <ATen/ops/cross_entropy_loss.h>
#include <torch/csrc/autograd/grad_mode.h>

#include "harness/phases/phases.h"

namespace oomguard::phases {

EvaluateResult evaluate(
    models::TinyGPT& model, data::Loader& loader, const EvaluateConfig& config) {
  torch::NoGradGuard no_grad;
  model->eval();
  double loss_sum = 0.0;
  for (int64_t step = 0; step < config.batches; ++step) {
    const data::Batch batch = loader.next();
    const at::Tensor logits = model->forward(batch.input_ids);  // [B, T, V]
    // Reduced to a host scalar now: nothing of this batch outlives the iteration.
    loss_sum += at::cross_entropy_loss(
                    logits.flatten(0, 1),
                    batch.labels.flatten(),
                    /*weight=*/{},
                    at::Reduction::Mean,
                    /*ignore_index=*/data::kIgnoreIndex)
                    .item<double>();
  }
  model->train();
  return {
      config.batches > 0 ? loss_sum / static_cast<double>(config.batches) : 0.0, config.batches};
}

}  // namespace oomguard::phases
