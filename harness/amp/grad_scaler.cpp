#include <oomguard/amp/grad_scaler.h>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

namespace oomguard::amp {

void GradScaler::start(c10::Device device) {
  if (scale_.defined())
    return;
  const auto on = at::TensorOptions(device);
  scale_ = at::full({}, options_.init_scale, on.dtype(at::kFloat));
  growth_tracker_ = at::full({}, 0, on.dtype(at::kInt));
}

at::Tensor GradScaler::scale(const at::Tensor& loss) {
  start(loss.device());
  return loss * scale_.to(loss.device());
}

void GradScaler::unscale_(const std::vector<at::Tensor>& params) {
  TORCH_CHECK(
      scale_.defined(), "GradScaler::unscale_() before scale(): there is nothing to unscale");
  TORCH_CHECK(!found_inf_.defined(), "GradScaler::unscale_() called twice before update()");
  // As PyTorch: the inverse in fp64 for its precision, then fp32; the flag; then the copies
  // its per-device replicator makes of both for the gradients' device (copies even when it is
  // the scale's own).
  const at::Tensor inv_scale = scale_.to(at::kDouble).reciprocal().to(at::kFloat);
  const at::Tensor found_inf =
      at::full({}, 0.0, at::TensorOptions(scale_.device()).dtype(at::kFloat));
  std::vector<at::Tensor> grads;
  for (const at::Tensor& p : params)
    if (p.grad().defined())
      grads.push_back(p.grad());
  const c10::Device device = grads.empty() ? scale_.device() : grads.front().device();
  const at::Tensor inv_here = inv_scale.to(device, at::kFloat, false, /*copy=*/true);
  found_inf_ = found_inf.to(device, at::kFloat, false, /*copy=*/true);
  if (!grads.empty())
    at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf_, inv_here);
}

bool GradScaler::finite() const {
  return !found_inf_.defined() || found_inf_.item<float>() == 0.0F;
}

void GradScaler::update() {
  if (!scale_.defined())
    return;
  const at::Tensor found_inf =
      found_inf_.defined() ? found_inf_.to(scale_.device())
                           : at::zeros({}, at::TensorOptions(scale_.device()).dtype(at::kFloat));
  at::_amp_update_scale_(
      scale_,
      growth_tracker_,
      found_inf,
      options_.growth_factor,
      options_.backoff_factor,
      options_.growth_interval);
  found_inf_ = at::Tensor();
}

double GradScaler::current_scale() const {
  return scale_.defined() ? scale_.item<double>() : options_.init_scale;
}

}  // namespace oomguard::amp
