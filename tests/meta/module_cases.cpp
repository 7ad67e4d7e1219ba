// The cases of module_cases.h: every module of torch/nn/modules/, at sizes where each
// activation is tens to hundreds of KiB, so that a tensor the Meta device missed or added
// shows in the figures.
#include "tests/meta/module_cases.h"

#include <tuple>
#include <type_traits>
#include <variant>
#include <utility>

#include <ATen/ops/log_softmax.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/full.h>
#include <torch/nn/functional.h>  // before modules.h: LibTorch 2.5.1 needs it first
#include <torch/nn/modules.h>

namespace oomguard::meta::modules {
namespace {

namespace nn = torch::nn;
using D = c10::Device;
using Tensors = std::vector<at::Tensor>;

constexpr int64_t kN = 4;   // batch
constexpr int64_t kC = 8;   // channels, features
constexpr int64_t kL = 64;  // a 1-d input's length
constexpr int64_t kH = 32;  // a 2-d input's side
constexpr int64_t kS = 12;  // a 3-d input's side

// An input of `shape` on `d` whose gradient is compared.
at::Tensor input(at::IntArrayRef shape, const D& d) {
  return at::randn(shape, at::TensorOptions().device(d)).requires_grad_(true);
}
// Integers in [0, high) on `d`: class indices, token ids.
at::Tensor indices(int64_t high, at::IntArrayRef shape, const D& d) {
  return at::randint(high, shape, at::TensorOptions().device(d).dtype(at::kLong));
}
// Values in [0, 1) on `d`, no gradient: targets of probabilities.
at::Tensor uniform(at::IntArrayRef shape, const D& d) {
  return at::rand(shape, at::TensorOptions().device(d));
}

const std::vector<int64_t> k1d = {kN, kC, kL};
const std::vector<int64_t> k2d = {kN, kC, kH, kH};
const std::vector<int64_t> k3d = {kN, kC, kS, kS, kS};
const std::vector<int64_t> kFeatures = {kN * kL, kC * 4};  // rows of features

// The CPU path's own allocations that a card does not make (module_cases.h, cpu_counts_more).
// (A CPU kernel's scratch, which the card's kernel does not allocate, is left out by the
// cpu_scratch rule: convolutions, upsampling, oneDNN's LSTM.)
const char* const kRnnWorkspace =
    "oneDNN's LSTM workspace, kept for backward (Meta runs LibTorch's LSTM of pointwise ops); a "
    "card keeps cuDNN's reserve space instead, whose size needs a GPU to measure";
const char* const kTemplateLayer =
    "the layer its options keep, never moved by to(): on the CPU in a GPU run, counted by the "
    "CPU path";

// The last case added, marked as one where the CPU path counts more.
void counts_more(std::vector<Case>& out, const char* why) {
  out.back().cpu_counts_more = why;
}

// A module of one tensor in, one out, on an input of `shape`.
template <class Holder>
Made unary(Holder module, const D& d, const std::vector<int64_t>& shape) {
  module->to(d);
  at::Tensor x = input(shape, d);
  return {module.ptr(), {x}, [module, x]() mutable { return Tensors{module->forward(x)}; }};
}

// A loss of (input, target) on rows of features; `target` is made on the device.
template <class Holder, class Target>
Made loss(Holder module, const D& d, Target target) {
  module->to(d);
  at::Tensor x = input(kFeatures, d);
  at::Tensor t = target(d);
  return {module.ptr(), {x}, [module, x, t]() mutable { return Tensors{module->forward(x, t)}; }};
}

template <class Make>
Case unary_case(std::string name, std::string family, Make make, std::vector<int64_t> shape) {
  return {
      std::move(name),
      std::move(family),
      [make, shape](const D& d) { return unary(make(), d, shape); },
      "",
      ""};
}

void activations(std::vector<Case>& out) {
  const std::string f = "activation";
  out.push_back(unary_case(
      "CELU", f, [] { return nn::CELU(); }, k1d));
  out.push_back(unary_case(
      "ELU", f, [] { return nn::ELU(); }, k1d));
  out.push_back(unary_case(
      "GELU", f, [] { return nn::GELU(); }, k1d));
  out.push_back(unary_case(
      "GLU", f, [] { return nn::GLU(); }, k1d));
  out.push_back(unary_case(
      "Hardshrink", f, [] { return nn::Hardshrink(); }, k1d));
  out.push_back(unary_case(
      "Hardtanh", f, [] { return nn::Hardtanh(); }, k1d));
  out.push_back(unary_case(
      "LeakyReLU", f, [] { return nn::LeakyReLU(); }, k1d));
  out.push_back(unary_case(
      "LogSigmoid", f, [] { return nn::LogSigmoid(); }, k1d));
  out.push_back(unary_case(
      "LogSoftmax", f, [] { return nn::LogSoftmax(1); }, k1d));
  out.push_back(unary_case(
      "Mish", f, [] { return nn::Mish(); }, k1d));
  out.push_back(unary_case(
      "PReLU", f, [] { return nn::PReLU(); }, k1d));
  out.push_back(unary_case(
      "RReLU", f, [] { return nn::RReLU(); }, k1d));
  out.push_back(unary_case(
      "ReLU", f, [] { return nn::ReLU(); }, k1d));
  out.push_back(unary_case(
      "ReLU6", f, [] { return nn::ReLU6(); }, k1d));
  out.push_back(unary_case(
      "SELU", f, [] { return nn::SELU(); }, k1d));
  out.push_back(unary_case(
      "SiLU", f, [] { return nn::SiLU(); }, k1d));
  out.push_back(unary_case(
      "Sigmoid", f, [] { return nn::Sigmoid(); }, k1d));
  out.push_back(unary_case(
      "Softmax", f, [] { return nn::Softmax(1); }, k1d));
  out.push_back(unary_case(
      "Softmax2d", f, [] { return nn::Softmax2d(); }, k2d));
  out.push_back(unary_case(
      "Softmin", f, [] { return nn::Softmin(1); }, k1d));
  out.push_back(unary_case(
      "Softplus", f, [] { return nn::Softplus(); }, k1d));
  out.push_back(unary_case(
      "Softshrink", f, [] { return nn::Softshrink(); }, k1d));
  out.push_back(unary_case(
      "Softsign", f, [] { return nn::Softsign(); }, k1d));
  out.push_back(unary_case(
      "Tanh", f, [] { return nn::Tanh(); }, k1d));
  out.push_back(unary_case(
      "Tanhshrink", f, [] { return nn::Tanhshrink(); }, k1d));
  out.push_back(unary_case(
      "Threshold", f, [] { return nn::Threshold(nn::ThresholdOptions(0.1, 0.0)); }, k1d));
  out.push_back(
      {"MultiheadAttention",
       f,
       [](const D& d) {
         nn::MultiheadAttention m(nn::MultiheadAttentionOptions(4 * kC, 4));
         m->to(d);
         at::Tensor x = input({kL, kN, 4 * kC}, d);
         // Self-attention: query, key and value the same tensor.
         return Made{m.ptr(), {x}, [m, x]() mutable {
                       auto [y, weights] = m->forward(x, x, x);
                       return Tensors{y, weights};
                     }};
       },
       "",
       "equal answers true for query, key and value as one tensor, false for two"});
}

void dropouts(std::vector<Case>& out) {
  const std::string f = "dropout";
  out.push_back(unary_case(
      "AlphaDropout", f, [] { return nn::AlphaDropout(0.2); }, k1d));
  out.push_back(unary_case(
      "Dropout", f, [] { return nn::Dropout(0.2); }, k1d));
  out.push_back(unary_case(
      "Dropout2d", f, [] { return nn::Dropout2d(0.2); }, k2d));
  out.push_back(unary_case(
      "Dropout3d", f, [] { return nn::Dropout3d(0.2); }, k3d));
  out.push_back(unary_case(
      "FeatureAlphaDropout", f, [] { return nn::FeatureAlphaDropout(0.2); }, k2d));
}

void convolutions(std::vector<Case>& out) {
  const std::string f = "conv";
  out.push_back(unary_case(
      "Conv1d", f, [] { return nn::Conv1d(nn::Conv1dOptions(kC, 2 * kC, 3).padding(1)); }, k1d));
  out.push_back(unary_case(
      "Conv2d", f, [] { return nn::Conv2d(nn::Conv2dOptions(kC, 2 * kC, 3).padding(1)); }, k2d));
  out.push_back(unary_case(
      "Conv3d", f, [] { return nn::Conv3d(nn::Conv3dOptions(kC, 2 * kC, 3).padding(1)); }, k3d));
  out.push_back(unary_case(
      "ConvTranspose1d",
      f,
      [] { return nn::ConvTranspose1d(nn::ConvTranspose1dOptions(kC, 2 * kC, 3).stride(2)); },
      k1d));
  out.push_back(unary_case(
      "ConvTranspose2d",
      f,
      [] { return nn::ConvTranspose2d(nn::ConvTranspose2dOptions(kC, 2 * kC, 3).stride(2)); },
      k2d));
  out.push_back(unary_case(
      "ConvTranspose3d",
      f,
      [] { return nn::ConvTranspose3d(nn::ConvTranspose3dOptions(kC, 2 * kC, 3).stride(2)); },
      k3d));
  out.push_back(unary_case(
      "Fold",
      "fold",
      [] {
        return nn::Fold(nn::FoldOptions({kH, kH}, {2, 2}));
      },
      {kN, kC * 4, (kH - 1) * (kH - 1)}));
  out.push_back(unary_case(
      "Unfold",
      "fold",
      [] {
        return nn::Unfold(nn::UnfoldOptions({2, 3}));
      },
      k2d));
}

void linears(std::vector<Case>& out) {
  const std::string f = "linear";
  out.push_back(unary_case(
      "Identity", f, [] { return nn::Identity(); }, kFeatures));
  out.push_back(unary_case(
      "Linear", f, [] { return nn::Linear(kC * 4, kC * 8); }, kFeatures));
  out.push_back(unary_case(
      "Flatten", f, [] { return nn::Flatten(); }, k2d));
  out.push_back(unary_case(
      "Unflatten",
      f,
      [] {
        return nn::Unflatten(nn::UnflattenOptions(1, {4, kC}));
      },
      kFeatures));
  out.push_back(
      {"Bilinear",
       f,
       [](const D& d) {
         nn::Bilinear m(kC * 4, kC * 2, kC * 3);
         m->to(d);
         at::Tensor a = input({kN * kL, kC * 4}, d), b = input({kN * kL, kC * 2}, d);
         return Made{m.ptr(), {a, b}, [m, a, b]() mutable { return Tensors{m->forward(a, b)}; }};
       },
       "",
       ""});
  for (const bool cosine : {true, false}) {
    out.push_back(
        {cosine ? "CosineSimilarity" : "PairwiseDistance",
         "distance",
         [cosine](const D& d) {
           at::Tensor a = input(kFeatures, d), b = input(kFeatures, d);
           if (cosine) {
             nn::CosineSimilarity m;
             return Made{
                 m.ptr(), {a, b}, [m, a, b]() mutable { return Tensors{m->forward(a, b)}; }};
           }
           nn::PairwiseDistance m;
           return Made{m.ptr(), {a, b}, [m, a, b]() mutable { return Tensors{m->forward(a, b)}; }};
         },
         "",
         ""});
  }
}

void embeddings(std::vector<Case>& out) {
  const std::string f = "embedding";
  out.push_back(
      {"Embedding",
       f,
       [](const D& d) {
         nn::Embedding m(1000, 4 * kC);
         m->to(d);
         at::Tensor ids = indices(1000, {kN, kL}, d);
         return Made{m.ptr(), {}, [m, ids]() mutable { return Tensors{m->forward(ids)}; }};
       },
       "",
       ""});
  for (const auto& [mode, name] :
       {std::pair{nn::EmbeddingBagMode(torch::kSum), "EmbeddingBag_sum"},
        std::pair{nn::EmbeddingBagMode(torch::kMean), "EmbeddingBag_mean"},
        std::pair{nn::EmbeddingBagMode(torch::kMax), "EmbeddingBag_max"}}) {
    out.push_back(
        {name,
         f,
         [mode = mode](const D& d) {
           nn::EmbeddingBag m(nn::EmbeddingBagOptions(1000, 4 * kC).mode(mode));
           m->to(d);
           at::Tensor ids = indices(1000, {kN * 8, kL / 8}, d);  // bags of 8
           return Made{m.ptr(), {}, [m, ids]() mutable { return Tensors{m->forward(ids)}; }};
         },
         "",
         std::string(name) == "EmbeddingBag_max"
             ? "backward: every bag taken as non-empty (their count is a value): an "
               "upper bound, the CPU's where none is empty"
             : ""});
  }
}

void normalisations(std::vector<Case>& out) {
  const std::string f = "normalization";
  out.push_back(unary_case(
      "BatchNorm1d", "batchnorm", [] { return nn::BatchNorm1d(kC); }, k1d));
  out.push_back(unary_case(
      "BatchNorm2d", "batchnorm", [] { return nn::BatchNorm2d(kC); }, k2d));
  out.push_back(unary_case(
      "BatchNorm3d", "batchnorm", [] { return nn::BatchNorm3d(kC); }, k3d));
  out.push_back(unary_case(
      "InstanceNorm1d",
      "instancenorm",
      [] { return nn::InstanceNorm1d(nn::InstanceNorm1dOptions(kC).affine(true)); },
      k1d));
  out.push_back(unary_case(
      "InstanceNorm2d",
      "instancenorm",
      [] { return nn::InstanceNorm2d(nn::InstanceNorm2dOptions(kC).affine(true)); },
      k2d));
  out.push_back(unary_case(
      "InstanceNorm3d",
      "instancenorm",
      [] { return nn::InstanceNorm3d(nn::InstanceNorm3dOptions(kC).affine(true)); },
      k3d));
  out.push_back(unary_case(
      "GroupNorm", f, [] { return nn::GroupNorm(nn::GroupNormOptions(2, kC)); }, k2d));
  out.push_back(unary_case(
      "LayerNorm", f, [] { return nn::LayerNorm(nn::LayerNormOptions({kC * 4})); }, kFeatures));
  out.push_back(unary_case(
      "LocalResponseNorm",
      f,
      [] { return nn::LocalResponseNorm(nn::LocalResponseNormOptions(3)); },
      k2d));
  out.push_back(unary_case(
      "CrossMapLRN2d", f, [] { return nn::CrossMapLRN2d(nn::CrossMapLRN2dOptions(3)); }, k2d));
}

void paddings(std::vector<Case>& out) {
  const std::string f = "padding";
  out.push_back(unary_case(
      "ConstantPad1d", f, [] { return nn::ConstantPad1d(nn::ConstantPad1dOptions(2, 0.5)); }, k1d));
  out.push_back(unary_case(
      "ConstantPad2d", f, [] { return nn::ConstantPad2d(nn::ConstantPad2dOptions(2, 0.5)); }, k2d));
  out.push_back(unary_case(
      "ConstantPad3d", f, [] { return nn::ConstantPad3d(nn::ConstantPad3dOptions(2, 0.5)); }, k3d));
  out.push_back(unary_case(
      "ZeroPad1d", f, [] { return nn::ZeroPad1d(2); }, k1d));
  out.push_back(unary_case(
      "ZeroPad2d", f, [] { return nn::ZeroPad2d(2); }, k2d));
  out.push_back(unary_case(
      "ZeroPad3d", f, [] { return nn::ZeroPad3d(2); }, k3d));
  out.push_back(unary_case(
      "ReflectionPad1d", f, [] { return nn::ReflectionPad1d(2); }, k1d));
  out.push_back(unary_case(
      "ReflectionPad2d", f, [] { return nn::ReflectionPad2d(2); }, k2d));
  out.push_back(unary_case(
      "ReflectionPad3d", f, [] { return nn::ReflectionPad3d(2); }, k3d));
  out.push_back(unary_case(
      "ReplicationPad1d", f, [] { return nn::ReplicationPad1d(2); }, k1d));
  out.push_back(unary_case(
      "ReplicationPad2d", f, [] { return nn::ReplicationPad2d(2); }, k2d));
  out.push_back(unary_case(
      "ReplicationPad3d", f, [] { return nn::ReplicationPad3d(2); }, k3d));
  out.push_back(unary_case(
      "PixelShuffle",
      "pixelshuffle",
      [] { return nn::PixelShuffle(nn::PixelShuffleOptions(2)); },
      k2d));
  out.push_back(unary_case(
      "PixelUnshuffle",
      "pixelshuffle",
      [] { return nn::PixelUnshuffle(nn::PixelUnshuffleOptions(2)); },
      k2d));
}

// MaxUnpool of the indices its MaxPool gave.
template <class Pool, class Unpool>
Made unpool(Pool pool, Unpool unpool, const D& d, const std::vector<int64_t>& shape) {
  pool->to(d);
  unpool->to(d);
  at::Tensor x = input(shape, d);
  return {unpool.ptr(), {x}, [pool, unpool, x]() mutable {
            auto [y, where] = pool->forward_with_indices(x);
            return Tensors{unpool->forward(y, where)};
          }};
}

// MaxPool and AdaptiveMaxPool with their indices.
template <class Holder>
Made with_indices(Holder module, const D& d, const std::vector<int64_t>& shape) {
  module->to(d);
  at::Tensor x = input(shape, d);
  return {module.ptr(), {x}, [module, x]() mutable {
            auto [y, where] = module->forward_with_indices(x);
            return Tensors{y, where};
          }};
}

void poolings(std::vector<Case>& out) {
  const std::string f = "pooling";
  out.push_back(unary_case(
      "AdaptiveAvgPool1d", f, [] { return nn::AdaptiveAvgPool1d(5); }, k1d));
  out.push_back(unary_case(
      "AdaptiveAvgPool2d", f, [] { return nn::AdaptiveAvgPool2d(5); }, k2d));
  out.push_back(unary_case(
      "AdaptiveAvgPool3d", f, [] { return nn::AdaptiveAvgPool3d(5); }, k3d));
  out.push_back(unary_case(
      "AdaptiveMaxPool1d", f, [] { return nn::AdaptiveMaxPool1d(5); }, k1d));
  out.push_back(unary_case(
      "AdaptiveMaxPool2d", f, [] { return nn::AdaptiveMaxPool2d(5); }, k2d));
  out.push_back(unary_case(
      "AdaptiveMaxPool3d", f, [] { return nn::AdaptiveMaxPool3d(5); }, k3d));
  out.push_back(unary_case(
      "AvgPool1d", f, [] { return nn::AvgPool1d(3); }, k1d));
  out.push_back(unary_case(
      "AvgPool2d", f, [] { return nn::AvgPool2d(3); }, k2d));
  out.push_back(unary_case(
      "AvgPool3d", f, [] { return nn::AvgPool3d(3); }, k3d));
  out.push_back(unary_case(
      "MaxPool1d", f, [] { return nn::MaxPool1d(3); }, k1d));
  out.push_back(unary_case(
      "MaxPool2d", f, [] { return nn::MaxPool2d(3); }, k2d));
  out.push_back(unary_case(
      "MaxPool3d", f, [] { return nn::MaxPool3d(3); }, k3d));
  out.push_back(
      {"MaxPool2d_with_indices",
       f,
       [](const D& d) { return with_indices(nn::MaxPool2d(3), d, k2d); },
       "",
       ""});
  out.push_back(
      {"AdaptiveMaxPool2d_with_indices",
       f,
       [](const D& d) { return with_indices(nn::AdaptiveMaxPool2d(5), d, k2d); },
       "",
       ""});
  out.push_back(unary_case(
      "LPPool1d", f, [] { return nn::LPPool1d(nn::LPPool1dOptions(2, 3)); }, k1d));
  out.push_back(unary_case(
      "LPPool2d", f, [] { return nn::LPPool2d(nn::LPPool2dOptions(2, 3)); }, k2d));
  out.push_back(unary_case(
      "LPPool3d", f, [] { return nn::LPPool3d(nn::LPPool3dOptions(2, 3)); }, k3d));
  out.push_back(unary_case(
      "FractionalMaxPool2d",
      f,
      [] { return nn::FractionalMaxPool2d(nn::FractionalMaxPool2dOptions(3).output_size(10)); },
      k2d));
  out.push_back(unary_case(
      "FractionalMaxPool3d",
      f,
      [] { return nn::FractionalMaxPool3d(nn::FractionalMaxPool3dOptions(3).output_size(5)); },
      k3d));
  out.push_back(
      {"MaxUnpool1d",
       f,
       [](const D& d) { return unpool(nn::MaxPool1d(2), nn::MaxUnpool1d(2), d, k1d); },
       "",
       ""});
  out.push_back(
      {"MaxUnpool2d",
       f,
       [](const D& d) { return unpool(nn::MaxPool2d(2), nn::MaxUnpool2d(2), d, k2d); },
       "",
       ""});
  out.push_back(
      {"MaxUnpool3d",
       f,
       [](const D& d) { return unpool(nn::MaxPool3d(2), nn::MaxUnpool3d(2), d, k3d); },
       "",
       ""});
}

// A recurrent layer over a sequence [kL, kN, features]: the output and the last states.
template <class Holder>
Made recurrent(Holder module, const D& d) {
  module->to(d);
  at::Tensor x = input({kL, kN, kC}, d);
  return {module.ptr(), {x}, [module, x]() mutable {
            auto [y, state] = module->forward(x);
            Tensors outs{y};
            if constexpr (std::is_same_v<std::decay_t<decltype(state)>, at::Tensor>) {
              outs.push_back(state);
            } else {
              outs.push_back(std::get<0>(state));
              outs.push_back(std::get<1>(state));
            }
            return outs;
          }};
}

void recurrents(std::vector<Case>& out) {
  const std::string f = "rnn";
  out.push_back(
      {"RNN",
       f,
       [](const D& d) { return recurrent(nn::RNN(nn::RNNOptions(kC, 4 * kC).num_layers(2)), d); },
       "",
       ""});
  out.push_back(
      {"LSTM",
       f,
       [](const D& d) { return recurrent(nn::LSTM(nn::LSTMOptions(kC, 4 * kC).num_layers(2)), d); },
       "",
       ""});
  counts_more(out, kRnnWorkspace);
  out.push_back(
      {"GRU",
       f,
       [](const D& d) { return recurrent(nn::GRU(nn::GRUOptions(kC, 4 * kC).num_layers(2)), d); },
       "",
       ""});
  out.push_back(unary_case(
      "RNNCell", f, [] { return nn::RNNCell(kC * 4, kC * 8); }, kFeatures));
  out.push_back(unary_case(
      "GRUCell", f, [] { return nn::GRUCell(kC * 4, kC * 8); }, kFeatures));
  out.push_back(
      {"LSTMCell",
       f,
       [](const D& d) {
         nn::LSTMCell m(kC * 4, kC * 8);
         m->to(d);
         at::Tensor x = input(kFeatures, d);
         return Made{m.ptr(), {x}, [m, x]() mutable {
                       auto [h, c] = m->forward(x);
                       return Tensors{h, c};
                     }};
       },
       "",
       ""});
}

constexpr int64_t kModel = 64;  // the transformers' d_model: 4 heads of 16

void transformers(std::vector<Case>& out) {
  const std::string f = "transformer";
  const auto encoder_layer = [] {
    return nn::TransformerEncoderLayerOptions(kModel, 4).dim_feedforward(4 * kModel);
  };
  const auto decoder_layer = [] {
    return nn::TransformerDecoderLayerOptions(kModel, 4).dim_feedforward(4 * kModel);
  };
  out.push_back(unary_case(
      "TransformerEncoderLayer",
      "transformerlayer",
      [=] { return nn::TransformerEncoderLayer(encoder_layer()); },
      {kL, kN, kModel}));
  out.push_back(unary_case(
      "TransformerEncoder",
      "transformercoder",
      [=] { return nn::TransformerEncoder(nn::TransformerEncoderOptions(encoder_layer(), 2)); },
      {kL, kN, kModel}));
  // The decoders and the whole Transformer: target and memory of different lengths.
  const auto two = [](auto module, const D& d) {
    module->to(d);
    at::Tensor target = input({kL / 2, kN, kModel}, d), memory = input({kL, kN, kModel}, d);
    return Made{module.ptr(), {target, memory}, [module, target, memory]() mutable {
                  return Tensors{module->forward(target, memory)};
                }};
  };
  out.push_back(
      {"TransformerDecoderLayer",
       "transformerlayer",
       [=](const D& d) { return two(nn::TransformerDecoderLayer(decoder_layer()), d); },
       "",
       ""});
  out.push_back(
      {"TransformerDecoder",
       "transformercoder",
       [=](const D& d) {
         return two(nn::TransformerDecoder(nn::TransformerDecoderOptions(decoder_layer(), 2)), d);
       },
       "",
       ""});
  counts_more(out, kTemplateLayer);
  out.push_back(
      {"Transformer",
       f,
       [](const D& d) {
         nn::Transformer m(nn::TransformerOptions(kModel, 4, 1, 1).dim_feedforward(4 * kModel));
         m->to(d);
         at::Tensor src = input({kL, kN, kModel}, d), tgt = input({kL / 2, kN, kModel}, d);
         return Made{m.ptr(), {src, tgt}, [m, src, tgt]() mutable {
                       return Tensors{m->forward(src, tgt)};
                     }};
       },
       "",
       ""});
  counts_more(out, kTemplateLayer);
}

void upsamplings(std::vector<Case>& out) {
  using Mode = std::decay_t<decltype(nn::UpsampleOptions().mode())>;
  const struct {
    const char* name;
    Mode mode;
    const std::vector<int64_t>* shape;
  } modes[] = {
      {"Upsample_nearest", torch::kNearest, &k2d},
      {"Upsample_linear", torch::kLinear, &k1d},
      {"Upsample_bilinear", torch::kBilinear, &k2d},
      {"Upsample_bicubic", torch::kBicubic, &k2d},
      {"Upsample_trilinear", torch::kTrilinear, &k3d}};
  for (const auto& m : modes) {
    const Mode mode = m.mode;
    const size_t spatial = m.shape->size() - 2;
    out.push_back(unary_case(
        m.name,
        "upsampling",
        [mode, spatial] {
          nn::UpsampleOptions o;
          o.scale_factor(std::vector<double>(spatial, 2.0)).mode(mode);
          if (!std::holds_alternative<torch::enumtype::kNearest>(mode))
            o.align_corners(false);
          return nn::Upsample(o);
        },
        *m.shape));
  }
}

at::Tensor classes(const D& d) {
  return indices(kC * 4, {kN * kL}, d);
}
at::Tensor signs(const D& d) {  // +1 or -1 per row
  return indices(2, {kN * kL}, d).mul(2).sub(1).to(at::kFloat);
}
at::Tensor like_input(const D& d) {
  return at::randn(kFeatures, at::TensorOptions().device(d));
}
at::Tensor uniform_like(const D& d) {
  return uniform(kFeatures, d);
}

void pointwise_losses(std::vector<Case>& out) {
  const std::string f = "loss";
  const auto add = [&](const char* name, auto make, auto target) {
    out.push_back(
        {name, f, [make, target](const D& d) { return loss(make(), d, target); }, "", ""});
  };
  add(
      "L1Loss", [] { return nn::L1Loss(); }, like_input);
  add(
      "MSELoss", [] { return nn::MSELoss(); }, like_input);
  add(
      "HuberLoss", [] { return nn::HuberLoss(); }, like_input);
  add(
      "SmoothL1Loss", [] { return nn::SmoothL1Loss(); }, like_input);
  add(
      "SoftMarginLoss", [] { return nn::SoftMarginLoss(); }, like_input);
  add(
      "BCEWithLogitsLoss", [] { return nn::BCEWithLogitsLoss(); }, uniform_like);
  add(
      "MultiLabelSoftMarginLoss", [] { return nn::MultiLabelSoftMarginLoss(); }, uniform_like);
  add(
      "PoissonNLLLoss", [] { return nn::PoissonNLLLoss(); }, uniform_like);
  add(
      "CrossEntropyLoss", [] { return nn::CrossEntropyLoss(); }, classes);
  add(
      "MultiMarginLoss", [] { return nn::MultiMarginLoss(); }, classes);
  add(
      "HingeEmbeddingLoss", [] { return nn::HingeEmbeddingLoss(); }, like_input);
  add(
      "MultiLabelMarginLoss",
      [] { return nn::MultiLabelMarginLoss(); },
      [](const D& d) { return indices(kC * 4, kFeatures, d); });
}

// A loss whose input is a function of x: probabilities, log-probabilities.
template <class Holder, class Of>
Made loss_of(Holder module, const D& d, Of of, at::Tensor target) {
  module->to(d);
  at::Tensor x = input(kFeatures, d);
  return {module.ptr(), {x}, [module, x, of, target]() mutable {
            return Tensors{module->forward(of(x), target)};
          }};
}

// A loss of three tensors: two inputs and a third (a target, or a negative).
template <class Holder>
Made triple(Holder module, const D& d, at::Tensor third, bool third_has_gradient) {
  module->to(d);
  at::Tensor a = input(kFeatures, d), b = input(kFeatures, d);
  Tensors compared{a, b};
  if (third_has_gradient) {
    third.requires_grad_(true);
    compared.push_back(third);
  }
  return {module.ptr(), compared, [module, a, b, third]() mutable {
            return Tensors{module->forward(a, b, third)};
          }};
}

void probability_losses(std::vector<Case>& out) {
  const std::string f = "loss";
  out.push_back(
      {"BCELoss",
       f,
       [](const D& d) {
         return loss_of(
             nn::BCELoss(),
             d,
             [](const at::Tensor& x) { return x.sigmoid(); },
             uniform(kFeatures, d));
       },
       "",
       ""});
  out.push_back(
      {"NLLLoss",
       f,
       [](const D& d) {
         return loss_of(
             nn::NLLLoss(),
             d,
             [](const at::Tensor& x) { return at::log_softmax(x, 1); },
             classes(d));
       },
       "",
       ""});
  out.push_back(
      {"KLDivLoss",
       f,
       [](const D& d) {
         return loss_of(
             nn::KLDivLoss(nn::KLDivLossOptions().reduction(torch::kBatchMean)),
             d,
             [](const at::Tensor& x) { return at::log_softmax(x, 1); },
             at::softmax(like_input(d), 1));
       },
       "",
       ""});
  out.push_back(
      {"CosineEmbeddingLoss",
       f,
       [](const D& d) { return triple(nn::CosineEmbeddingLoss(), d, signs(d), false); },
       "",
       ""});
  out.push_back(
      {"MarginRankingLoss",
       f,
       [](const D& d) {
         nn::MarginRankingLoss m;
         m->to(d);
         at::Tensor a = input({kN * kL}, d), b = input({kN * kL}, d), y = signs(d);
         return Made{
             m.ptr(), {a, b}, [m, a, b, y]() mutable { return Tensors{m->forward(a, b, y)}; }};
       },
       "",
       ""});
  out.push_back(
      {"TripletMarginLoss",
       f,
       [](const D& d) { return triple(nn::TripletMarginLoss(), d, like_input(d), true); },
       "",
       ""});
  out.push_back(
      {"TripletMarginWithDistanceLoss",
       f,
       [](const D& d) {
         return triple(nn::TripletMarginWithDistanceLoss(), d, like_input(d), true);
       },
       "",
       ""});
}

// CTCLoss over T steps of kN sequences of 20 classes (0 the blank), targets of up to 16
// labels: padded 2-d, or concatenated 1-d.
Made ctc(const D& d, bool padded) {
  constexpr int64_t kT = 50, kClasses = 20, kTarget = 16;
  nn::CTCLoss m;
  m->to(d);
  at::Tensor x = input({kT, kN, kClasses}, d);
  const at::TensorOptions lengths = at::TensorOptions().device(d).dtype(at::kLong);
  at::Tensor targets = padded ? at::randint(1, kClasses, {kN, kTarget}, lengths)
                              : at::randint(1, kClasses, {kN * kTarget}, lengths);
  at::Tensor input_lengths = at::full({kN}, kT, lengths);
  at::Tensor target_lengths = at::full({kN}, kTarget, lengths);
  return {
      m.ptr(), {x}, [=]() mutable {
        return Tensors{m->forward(at::log_softmax(x, 2), targets, input_lengths, target_lengths)};
      }};
}

void sequence_losses(std::vector<Case>& out) {
  out.push_back(
      {"CTCLoss",
       "loss",
       [](const D& d) { return ctc(d, true); },
       "",
       "2-d targets; log_alpha sized by the targets' padded length, an upper bound"});
  out.push_back(
      {"CTCLoss_1d_targets",
       "loss",
       [](const D& d) { return ctc(d, false); },
       "aten::_ctc_loss.Tensor",
       "1-d targets: their lengths' values decide log_alpha's size"});
  out.push_back(
      {"AdaptiveLogSoftmaxWithLoss",
       "adaptive",
       [](const D& d) {
         nn::AdaptiveLogSoftmaxWithLoss m(
             nn::AdaptiveLogSoftmaxWithLossOptions(kC * 4, 1000, {100, 500}));
         m->to(d);
         at::Tensor x = input(kFeatures, d), t = indices(1000, {kN * kL}, d);
         return Made{m.ptr(), {x}, [m, x, t]() mutable {
                       const auto result = m->forward(x, t);
                       return Tensors{result.output};  // its loss is a double
                     }};
       },
       "aten::nonzero",
       "the rows of each cluster are a nonzero of a mask"});
}

// The containers: a Sequential; parameters and modules held in a ParameterList, a
// ParameterDict, a ModuleList and a ModuleDict, all moved with the module that registers them;
// a Functional.
struct HoldsParametersImpl : nn::Module {
  HoldsParametersImpl() {
    list = register_module("list", nn::ParameterList(at::randn({kC * 4, kC * 4})));
    dict = register_module("dict", nn::ParameterDict());
    dict->insert("bias", at::randn({kC * 4}));
    blocks = register_module("blocks", nn::ModuleList(nn::Linear(kC * 4, kC * 4)));
    named = register_module("named", nn::ModuleDict());
    named->update({{"out", std::make_shared<nn::LinearImpl>(kC * 4, kC * 2)}});
  }
  at::Tensor forward(const at::Tensor& x) {
    const at::Tensor h = blocks[0]->as<nn::Linear>()->forward(x.matmul(list[0]) + dict["bias"]);
    return named["out"]->as<nn::Linear>()->forward(h);
  }
  nn::ParameterList list{nullptr};
  nn::ParameterDict dict{nullptr};
  nn::ModuleList blocks{nullptr};
  nn::ModuleDict named{nullptr};
};
TORCH_MODULE(HoldsParameters);

void containers(std::vector<Case>& out) {
  const std::string f = "container";
  out.push_back(unary_case(
      "Sequential",
      f,
      [] { return nn::Sequential(nn::Linear(kC * 4, kC * 8), nn::ReLU(), nn::Linear(kC * 8, kC)); },
      kFeatures));
  out.push_back(unary_case(
      "ModuleList_ModuleDict_ParameterList_ParameterDict",
      f,
      [] { return HoldsParameters(); },
      kFeatures));
  out.push_back(unary_case(
      "Functional", f, [] { return nn::Functional([](at::Tensor x) { return x.tanh(); }); }, k1d));
}

// Models of several modules, each a step of a real network: a conv net with batch norm, a
// transformer of TransformerEncoderLayers, an LSTM language model and a GAN.
struct ConvNetImpl : nn::Module {
  ConvNetImpl() {
    features = register_module(
        "features",
        nn::Sequential(
            nn::Conv2d(nn::Conv2dOptions(3, 16, 3).padding(1)),
            nn::BatchNorm2d(16),
            nn::ReLU(),
            nn::MaxPool2d(2),
            nn::Conv2d(nn::Conv2dOptions(16, 32, 3).padding(1)),
            nn::BatchNorm2d(32),
            nn::ReLU(),
            nn::AdaptiveAvgPool2d(1)));
    classify = register_module("classify", nn::Linear(32, 10));
  }
  at::Tensor forward(const at::Tensor& x) { return classify(features->forward(x).flatten(1)); }
  nn::Sequential features{nullptr};
  nn::Linear classify{nullptr};
};
TORCH_MODULE(ConvNet);

struct LstmLmImpl : nn::Module {
  LstmLmImpl() {
    embed = register_module("embed", nn::Embedding(1000, 64));
    lstm = register_module("lstm", nn::LSTM(nn::LSTMOptions(64, 128).num_layers(2)));
    head = register_module("head", nn::Linear(128, 1000));
  }
  at::Tensor forward(const at::Tensor& ids) { return head(std::get<0>(lstm->forward(embed(ids)))); }
  nn::Embedding embed{nullptr};
  nn::LSTM lstm{nullptr};
  nn::Linear head{nullptr};
};
TORCH_MODULE(LstmLm);

// A GAN's generator step: noise up to 28 x 28 through transposed convolutions with batch
// norm, judged by a discriminator of strided convolutions, with binary cross-entropy.
struct GanImpl : nn::Module {
  GanImpl() {
    const auto up = [](int64_t in, int64_t out, int64_t k, int64_t s, int64_t p) {
      return nn::ConvTranspose2d(
          nn::ConvTranspose2dOptions(in, out, k).stride(s).padding(p).bias(false));
    };
    const auto down = [](int64_t in, int64_t out, int64_t k, int64_t s, int64_t p) {
      return nn::Conv2d(nn::Conv2dOptions(in, out, k).stride(s).padding(p).bias(false));
    };
    const auto leaky = [] { return nn::LeakyReLU(nn::LeakyReLUOptions().negative_slope(0.2)); };
    generator = register_module(
        "generator",
        nn::Sequential(
            up(64, 128, 4, 1, 0),
            nn::BatchNorm2d(128),
            nn::ReLU(),
            up(128, 64, 3, 2, 1),
            nn::BatchNorm2d(64),
            nn::ReLU(),
            up(64, 32, 4, 2, 1),
            nn::BatchNorm2d(32),
            nn::ReLU(),
            up(32, 1, 4, 2, 1),
            nn::Tanh()));
    discriminator = register_module(
        "discriminator",
        nn::Sequential(
            down(1, 32, 4, 2, 1),
            leaky(),
            down(32, 64, 4, 2, 1),
            nn::BatchNorm2d(64),
            leaky(),
            down(64, 128, 4, 2, 1),
            nn::BatchNorm2d(128),
            leaky(),
            down(128, 1, 3, 1, 0),
            nn::Sigmoid()));
  }
  at::Tensor forward(const at::Tensor& noise) {
    const at::Tensor judged = discriminator->forward(generator->forward(noise)).view({-1});
    return bce(judged, at::ones_like(judged));
  }
  nn::Sequential generator{nullptr}, discriminator{nullptr};
  nn::BCELoss bce;
};
TORCH_MODULE(Gan);

void models(std::vector<Case>& out) {
  const std::string f = "model";
  out.push_back(unary_case("ConvNet_with_BatchNorm", f, [] { return ConvNet(); }, {16, 3, 32, 32}));
  out.push_back(unary_case(
      "Transformer_of_TransformerEncoderLayers",
      f,
      [] {
        const auto layer =
            nn::TransformerEncoderLayerOptions(2 * kModel, 4).dim_feedforward(8 * kModel);
        return nn::Sequential(
            nn::TransformerEncoderLayer(layer), nn::TransformerEncoderLayer(layer));
      },
      {kL * 2, kN, 2 * kModel}));
  out.push_back(
      {"LSTM_language_model",
       f,
       [](const D& d) {
         LstmLm m;
         m->to(d);
         at::Tensor ids = indices(1000, {kL, kN}, d);
         return Made{m.ptr(), {}, [m, ids]() mutable { return Tensors{m->forward(ids)}; }};
       },
       "",
       ""});
  counts_more(out, kRnnWorkspace);
  out.push_back(unary_case("GAN_generator_step", f, [] { return Gan(); }, {kN * 16, 64, 1, 1}));
}

}  // namespace

const std::vector<Case>& cases() {
  static const std::vector<Case> all = [] {
    std::vector<Case> c;
    activations(c);
    dropouts(c);
    convolutions(c);
    linears(c);
    embeddings(c);
    normalisations(c);
    paddings(c);
    poolings(c);
    recurrents(c);
    transformers(c);
    upsamplings(c);
    pointwise_losses(c);
    probability_losses(c);
    sequence_losses(c);
    containers(c);
    models(c);
    return c;
  }();
  return all;
}

}  // namespace oomguard::meta::modules
