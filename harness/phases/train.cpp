#include <algorithm>

#include <ATen/ops/cross_entropy_loss.h>
#include <torch/nn/utils/clip_grad.h>

#include "harness/interrupt.h"
#include <oomguard/memory/alloc_site.h>
#include "harness/phases/phases.h"

namespace oomguard::phases {

TrainResult train(
    models::TinyGPT& model,
    torch::optim::AdamW& optimizer,
    data::Loader& loader,
    const TrainConfig& config) {
  model->train();
  TrainResult result;
  result.losses.reserve(static_cast<size_t>(config.steps));
  for (int64_t step = 0; step < config.steps; ++step) {
    throw_if_interrupted();
    memory::set_alloc_step(step);
    const data::Batch batch = loader.next().to(model->device());
    result.longest_batch = std::max(result.longest_batch, batch.input_ids.size(1));
    const at::Tensor logits = model->forward(batch.input_ids);  // [B, T, V]
    at::Tensor loss = at::cross_entropy_loss(
        logits.flatten(0, 1),
        batch.labels.flatten(),
        /*weight=*/{},
        at::Reduction::Mean,
        /*ignore_index=*/data::kIgnoreIndex);
    optimizer.zero_grad(/*set_to_none=*/true);
    {
      memory::AllocTag tag("backward");
      loss.backward();
    }
    memory::AllocTag tag("optimizer");
    torch::nn::utils::clip_grad_norm_(model->parameters(), config.grad_clip);
    optimizer.step();
    result.losses.push_back(loss.item<double>());
  }
  memory::set_alloc_step(-1);  // what follows is the phase's, no step's
  optimizer.zero_grad(/*set_to_none=*/true);
  return result;
}

}  // namespace oomguard::phases
