#include <algorithm>

#include <ATen/ops/cross_entropy_loss.h>
#include <c10/core/GradMode.h>

#include "harness/interrupt.h"
#include <oomguard/memory/alloc_site.h>
#include "harness/phases/phases.h"

namespace oomguard::phases {

EvaluateResult evaluate(
    models::TinyGPT& model, data::Loader& loader, const EvaluateConfig& config) {
  // Guarded: no autograd graph, dropout off. Unguarded: exactly what a forgotten guard does.
  c10::AutoGradMode grad_mode(/*enabled=*/!config.no_grad);
  if (config.no_grad) {
    model->eval();
  }
  std::vector<at::Tensor> kept;  // unguarded only: [B, T, V] logits, each with its graph
  EvaluateResult result;
  result.steps = config.batches;
  double loss_sum = 0.0;
  for (int64_t step = 0; step < config.batches; ++step) {
    throw_if_interrupted();
    memory::set_alloc_step(step);
    const data::Batch batch = loader.next().to(model->device());
    result.longest_batch = std::max(result.longest_batch, batch.input_ids.size(1));
    const at::Tensor logits = model->forward(batch.input_ids);  // [B, T, V]
    if (config.on_batch) {
      config.on_batch(logits);
    }
    // Reduced to a host scalar now: guarded, nothing of this batch outlives the iteration.
    loss_sum += at::cross_entropy_loss(
                    logits.flatten(0, 1),
                    batch.labels.flatten(),
                    /*weight=*/{},
                    at::Reduction::Mean,
                    /*ignore_index=*/data::kIgnoreIndex)
                    .item<double>();
    if (!config.no_grad) {
      kept.push_back(logits);
    }
  }
  memory::set_alloc_step(-1);  // what follows (the kept batches freed) is no step's
  model->train();
  result.loss = config.batches > 0 ? loss_sum / static_cast<double>(config.batches) : 0.0;
  return result;
}

}  // namespace oomguard::phases
