#pragma once
// Linear, Embedding and LayerNorm with their parameters made on a given device: torch::nn's
// take none (their parameters are made on the CPU, and LibTorch's Module::to(kMeta) fails), so
// a model on the Meta device could not exist without building it on the CPU first. The same
// parameters (names, shapes, order), the same initialisation and the same operators as
// torch::nn's default options; every parameter is fp32. On Meta the initialisers draw nothing
// (LibTorch's Meta uniform_ and normal_ leave the generator as it was), so the CPU's random
// draws after a model built there differ from those after the same model built on the CPU.
// TinyGPT is built of them, and a model of your own can be:
//   oomguard::models::Linear fc(1024, 4096, oomguard::testing::device());  // Meta under
//                                                                           // OOMGUARD_DEVICE=meta
#include <cstdint>

#include <c10/core/Device.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

namespace oomguard::models {

// torch::nn::Linear with its default bias=true (always: there is no option without one):
// weight [out, in] (Kaiming uniform), bias [out] (uniform).
class LinearImpl : public torch::nn::Module {
 public:
  LinearImpl(int64_t in, int64_t out, c10::Device device);
  torch::Tensor forward(const torch::Tensor& x);  // as torch::nn::Linear: addmm, or matmul + bias

  torch::Tensor weight, bias;
};
TORCH_MODULE(Linear);

// torch::nn::Embedding: weight [rows, dim] (normal).
class EmbeddingImpl : public torch::nn::Module {
 public:
  EmbeddingImpl(int64_t rows, int64_t dim, c10::Device device);
  torch::Tensor forward(const torch::Tensor& ids);  // at::embedding

  torch::Tensor weight;
};
TORCH_MODULE(Embedding);

// torch::nn::LayerNorm over the last dimension: weight (ones), bias (zeros), eps 1e-5.
class LayerNormImpl : public torch::nn::Module {
 public:
  LayerNormImpl(int64_t dim, c10::Device device);
  torch::Tensor forward(const torch::Tensor& x);  // at::layer_norm

  torch::Tensor weight, bias;
};
TORCH_MODULE(LayerNorm);

}  // namespace oomguard::models
