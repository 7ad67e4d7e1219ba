#include <oomguard/models/layers.h>

#include <cmath>

#include <ATen/ops/embedding.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/layer_norm.h>
#include <torch/nn/functional/linear.h>
#include <torch/nn/init.h>

namespace oomguard::models {
namespace {

at::TensorOptions on(c10::Device device) {
  return at::TensorOptions().device(device).dtype(at::kFloat);
}

}  // namespace

LinearImpl::LinearImpl(int64_t in, int64_t out, c10::Device device)
    : weight(register_parameter("weight", at::empty({out, in}, on(device)))),
      bias(register_parameter("bias", at::empty({out}, on(device)))) {
  // torch::nn::Linear's reset_parameters: the same draws in the same order.
  const torch::NoGradGuard no_grad;
  torch::nn::init::kaiming_uniform_(weight, std::sqrt(5.0));
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  torch::nn::init::uniform_(bias, -bound, bound);
}

// What torch::nn::Linear calls (not at::linear, whose allocations differ): a 2-D input
// through one addmm with the bias, any other through matmul and the bias added in place.
torch::Tensor LinearImpl::forward(const torch::Tensor& x) {
  return torch::nn::functional::linear(x, weight, bias);
}

EmbeddingImpl::EmbeddingImpl(int64_t rows, int64_t dim, c10::Device device)
    : weight(register_parameter("weight", at::empty({rows, dim}, on(device)))) {
  const torch::NoGradGuard no_grad;
  torch::nn::init::normal_(weight);
}

torch::Tensor EmbeddingImpl::forward(const torch::Tensor& ids) {
  return at::embedding(weight, ids);
}

LayerNormImpl::LayerNormImpl(int64_t dim, c10::Device device)
    : weight(register_parameter("weight", at::empty({dim}, on(device)))),
      bias(register_parameter("bias", at::empty({dim}, on(device)))) {
  const torch::NoGradGuard no_grad;
  torch::nn::init::ones_(weight);
  torch::nn::init::zeros_(bias);
}

torch::Tensor LayerNormImpl::forward(const torch::Tensor& x) {
  return at::layer_norm(x, {x.size(-1)}, weight, bias, 1e-5);
}

}  // namespace oomguard::models
