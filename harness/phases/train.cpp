#include <algorithm>

#include <ATen/ops/cross_entropy_loss.h>
#include <torch/nn/utils/clip_grad.h>

#include "harness/interrupt.h"
#include <oomguard/amp/cuda_autocast.h>
#include <oomguard/amp/grad_scaler.h>
#include <oomguard/memory/alloc_site.h>
#include "harness/phases/phases.h"

namespace oomguard::phases {
namespace {

std::optional<at::ScalarType> autocast_dtype(Precision precision) {
  switch (precision) {
    case Precision::kFp16Amp:
      return at::kHalf;
    case Precision::kBf16Amp:
      return at::kBFloat16;
    case Precision::kFp32:
      break;
  }
  return std::nullopt;
}

}  // namespace

TrainResult train(
    models::TinyGPT& model,
    torch::optim::AdamW& optimizer,
    data::Loader& loader,
    const TrainConfig& config) {
  model->train();
  TrainResult result;
  result.losses.reserve(static_cast<size_t>(config.steps));
  // fp16's gradients need the loss scaled; the scaler's scale lives across the steps.
  std::optional<amp::GradScaler> scaler;
  if (config.precision == Precision::kFp16Amp) {
    scaler.emplace();
    scaler->start(model->device());  // before the steps, so that every step allocates alike
  }
  for (int64_t step = 0; step < config.steps; ++step) {
    throw_if_interrupted();
    memory::set_alloc_step(step);
    const data::Batch batch = loader.next().to(model->device());
    result.longest_batch = std::max(result.longest_batch, batch.input_ids.size(1));
    at::Tensor logits, loss;
    {
      amp::CudaAutocast autocast(autocast_dtype(config.precision));
      logits = model->forward(batch.input_ids);  // [B, T, V]
      loss = at::cross_entropy_loss(
          logits.flatten(0, 1),
          batch.labels.flatten(),
          /*weight=*/{},
          at::Reduction::Mean,
          /*ignore_index=*/data::kIgnoreIndex);
    }
    optimizer.zero_grad(/*set_to_none=*/true);
    {
      memory::AllocTag tag("backward");
      (scaler ? scaler->scale(loss) : loss).backward();
    }
    memory::AllocTag tag("optimizer");
    if (scaler)
      scaler->unscale_(model->parameters());
    torch::nn::utils::clip_grad_norm_(model->parameters(), config.grad_clip);
    if (!scaler || scaler->finite())
      optimizer.step();
    if (scaler)
      scaler->update();
    result.losses.push_back(loss.item<double>());
  }
  memory::set_alloc_step(-1);  // what follows is the phase's, no step's
  optimizer.zero_grad(/*set_to_none=*/true);
  return result;
}

}  // namespace oomguard::phases
