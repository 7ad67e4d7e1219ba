#pragma once
// A loss scaler for fp16 training, as PyTorch's torch.amp.GradScaler makes it (LibTorch has
// none): the loss is multiplied by a scale so that small fp16 gradients do not flush to zero;
// before the optimizer steps, the gradients are divided by it and checked for inf and NaN
// (at::_amp_foreach_non_finite_check_and_unscale_); a step whose gradients overflowed is
// skipped, and the scale is updated (at::_amp_update_scale_): halved after an overflow,
// doubled after `growth_interval` clean steps. It allocates what PyTorch's does: the scale
// and the growth tracker (one element each, kept), and per unscale the inverse scale (through
// fp64), the inf flag and their copies for the gradients' device.
//
//   oomguard::amp::GradScaler scaler;
//   {  // CUDA autocast on for the forward and the loss
//     loss = loss_fn(model->forward(batch));
//   }
//   scaler.scale(loss).backward();
//   scaler.unscale_(model->parameters());   // before clipping, if any
//   if (scaler.finite()) optimizer.step();  // GradScaler.step()
//   scaler.update();
//
// bf16 needs no scaler (its range is fp32's); fp32 neither. On Meta the inf check reads no
// value: finite() is true, the step runs, as on a card whose gradients are finite.
#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

namespace oomguard::amp {

class GradScaler {
 public:
  struct Options {
    double init_scale = 65536.0;  // 2^16, PyTorch's default
    double growth_factor = 2.0;
    double backoff_factor = 0.5;
    int64_t growth_interval = 2000;
  };
  GradScaler() : GradScaler(Options{}) {}
  explicit GradScaler(Options options) : options_(options) {}

  // Makes the scale (fp32) and the growth tracker (int32) on `device` now, as scale() does at
  // its first call otherwise: a loop whose steps must allocate alike (measure_steps' orders)
  // makes them before its first step. Does nothing once they exist.
  void start(c10::Device device);
  // loss * scale; start(loss.device()) first.
  at::Tensor scale(const at::Tensor& loss);
  // Divides each gradient of `params` by the scale in place and records whether any was inf
  // or NaN. Once per step, after backward; parameters without a gradient are skipped.
  void unscale_(const std::vector<at::Tensor>& params);
  // False when unscale_() found an inf or NaN: skip the optimizer's step (reads one value).
  bool finite() const;
  // The scale for the next step; ends the step's unscale state.
  void update();
  // The present scale (reads one value; init_scale before the first scale()).
  double current_scale() const;

 private:
  Options options_;
  at::Tensor scale_;           // fp32, one element
  at::Tensor growth_tracker_;  // int32, one element: clean steps since the last change
  at::Tensor found_inf_;  // this step's flag, on the gradients' device; undefined before unscale_
};

}  // namespace oomguard::amp
