// oomguard's Meta kernels (harness/meta/) against LibTorch's CPU kernels: each output with
// the same sizes, dtype, strides and storage bytes, new or aliasing its input as on the CPU;
// every Meta storage counted by the Meta allocator, one that resize_ grows too.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include <ATen/ops/_fused_adamw.h>
#include <ATen/ops/_fused_sdp_choice.h>
#include <ATen/ops/_local_scalar_dense.h>
#include <ATen/ops/batch_norm.h>
#include <ATen/ops/binary_cross_entropy_with_logits.h>
#include <ATen/ops/conv2d.h>
#include <ATen/ops/conv_transpose2d.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <ATen/ops/embedding.h>
#include <ATen/ops/embedding_dense_backward.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/layer_norm.h>
#include <ATen/ops/leaky_relu.h>
#include <ATen/ops/log_sigmoid_backward.h>
#include <ATen/ops/log_sigmoid_forward.h>
#include <ATen/ops/multinomial.h>
#include <ATen/ops/native_batch_norm.h>
#include <ATen/ops/native_batch_norm_backward.h>
#include <ATen/ops/native_layer_norm.h>
#include <ATen/ops/native_layer_norm_backward.h>
#include <ATen/ops/nonzero.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_backward.h>
#include <ATen/ops/scaled_dot_product_attention.h>
#include <ATen/ops/tanh.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <torch/csrc/autograd/function.h>

#include <oomguard/memory/tracking_allocator.h>
#include <oomguard/meta/meta_device.h>
#include "tests/meta/on_meta.h"
#include "harness/meta/sdp_backend.h"

namespace oomguard::meta {
namespace {

class MetaKernels : public ::testing::Test {
 protected:
  void SetUp() override { use_meta_device(); }
};

// `meta` is laid out as `cpu` is: sizes, strides, dtype, offset, storage bytes.
void expect_like(const at::Tensor& meta, const at::Tensor& cpu, const std::string& what) {
  ASSERT_EQ(meta.defined(), cpu.defined()) << what;
  if (!cpu.defined())
    return;
  EXPECT_TRUE(meta.is_meta()) << what;
  EXPECT_EQ(meta.sizes(), cpu.sizes()) << what;
  EXPECT_EQ(meta.strides(), cpu.strides()) << what;
  EXPECT_EQ(meta.scalar_type(), cpu.scalar_type()) << what;
  EXPECT_EQ(meta.storage_offset(), cpu.storage_offset()) << what;
  EXPECT_EQ(meta.storage().nbytes(), cpu.storage().nbytes()) << what;
}

// Aliasing: `out` shares a storage with `in` on Meta where it does on the CPU.
void expect_aliasing(
    const at::Tensor& meta_out,
    const at::Tensor& meta_in,
    const at::Tensor& cpu_out,
    const at::Tensor& cpu_in,
    const std::string& what) {
  if (cpu_out.defined()) {
    EXPECT_EQ(meta_out.is_alias_of(meta_in), cpu_out.is_alias_of(cpu_in)) << what;
  }
}

int64_t meta_allocated() {
  return memory::TrackingAllocator::meta().stats().allocated_bytes;
}

TEST_F(MetaKernels, LayerNormForwardAndBackwardAsOnTheCpu) {
  for (const bool strided : {false, true}) {
    at::Tensor x = at::randn({4, 6, 32});
    if (strided)
      x = at::randn({6, 4, 32}).transpose(0, 1);  // not contiguous: both copy it first
    const at::Tensor w = at::randn({32}), b = at::randn({32});
    const auto cpu = at::native_layer_norm(x, {32}, w, b, 1e-5);
    const at::Tensor mx = on_meta(x), mw = on_meta(w), mb = on_meta(b);
    const auto meta = at::native_layer_norm(mx, {32}, mw, mb, 1e-5);
    const std::string what = strided ? "strided input" : "contiguous input";
    expect_like(std::get<0>(meta), std::get<0>(cpu), "y, " + what);
    expect_like(std::get<1>(meta), std::get<1>(cpu), "mean, " + what);
    expect_like(std::get<2>(meta), std::get<2>(cpu), "rstd, " + what);
    expect_aliasing(std::get<0>(meta), mx, std::get<0>(cpu), x, "y, " + what);

    const at::Tensor dy = at::randn({4, 6, 32});
    for (const std::array<bool, 3> mask :
         {std::array<bool, 3>{true, true, true}, std::array<bool, 3>{true, false, false}}) {
      const auto cpu_back = at::native_layer_norm_backward(
          dy, x, {32}, std::get<1>(cpu), std::get<2>(cpu), w, b, mask);
      const auto meta_back = at::native_layer_norm_backward(
          on_meta(dy), mx, {32}, std::get<1>(meta), std::get<2>(meta), mw, mb, mask);
      expect_like(std::get<0>(meta_back), std::get<0>(cpu_back), "dx, " + what);
      expect_like(std::get<1>(meta_back), std::get<1>(cpu_back), "dgamma, " + what);
      expect_like(std::get<2>(meta_back), std::get<2>(cpu_back), "dbeta, " + what);
    }
  }
  // The composite layer_norm (what torch::nn::LayerNorm calls) runs on Meta now.
  expect_like(
      at::layer_norm(on_meta(at::randn({2, 8})), {8}),
      at::layer_norm(at::randn({2, 8}), {8}),
      "layer_norm");
}

TEST_F(MetaKernels, IndexSelectEmbeddingAndItsBackwardAsOnTheCpu) {
  const at::Tensor weight = at::randn({50, 16});
  const at::Tensor ids = at::randint(50, {4, 7}, at::kLong);
  for (const int64_t dim : {0, 1, -1}) {
    const at::Tensor index = at::randint(weight.size(dim < 0 ? 1 : dim), {5}, at::kLong);
    expect_like(
        at::index_select(on_meta(weight), dim, on_meta(index)),
        at::index_select(weight, dim, index),
        "index_select dim " + std::to_string(dim));
  }
  const at::Tensor mw = on_meta(weight), mids = on_meta(ids);
  const at::Tensor cpu_out = at::embedding(weight, ids), meta_out = at::embedding(mw, mids);
  expect_like(meta_out, cpu_out, "embedding");
  expect_aliasing(meta_out, mw, cpu_out, weight, "embedding");
  const at::Tensor grad = at::randn({4, 7, 16});
  expect_like(
      at::embedding_dense_backward(on_meta(grad), mids, 50, -1, false),
      at::embedding_dense_backward(grad, ids, 50, -1, false),
      "embedding_dense_backward");
}

TEST_F(MetaKernels, WhereBroadcastsAndPromotesAsOnTheCpu) {
  const at::Tensor cond = at::rand({4, 1, 8}) > 0.5;
  const at::Tensor a = at::randn({1, 3, 8}), b = at::randn({8}, at::kDouble);
  expect_like(at::where(on_meta(cond), on_meta(a), on_meta(b)), at::where(cond, a, b), "where");
}

TEST_F(MetaKernels, WhereOutResizesItsOutputAsOnTheCpu) {
  const at::Tensor cond = at::rand({4, 1, 8}) > 0.5, a = at::randn({1, 6, 8}), b = at::randn({8});
  at::Tensor cpu = at::empty({0});
  at::Tensor meta = at::empty({0}, at::TensorOptions().device(at::kMeta));
  const int64_t before = meta_allocated();
  at::where_out(cpu, cond, a, b);
  at::where_out(meta, on_meta(cond), on_meta(a), on_meta(b));
  expect_like(meta, cpu, "where.self_out");
  EXPECT_EQ(meta_allocated() - before, 4 * 6 * 8 * 4) << "the grown output is counted";
}

// How q, k and v of [B, H, T, D] = [2, 4, 16, 8] are laid out.
enum class Layout {
  kContiguous,
  kViews,     // each a view of [B, T, H, D], as after a head split
  kSplit,     // views of one [B, T, 3, H, D] projection, as TinyGPT makes them (not dense)
  kSliced,    // the first half of a wider head dimension (not dense)
  kPermuted,  // dense, in another order ([T, B, H, D])
};
constexpr Layout kLayouts[] = {
    Layout::kContiguous, Layout::kViews, Layout::kSplit, Layout::kSliced, Layout::kPermuted};

std::vector<at::Tensor> attention_inputs(Layout layout) {
  if (layout == Layout::kSplit) {
    const at::Tensor qkv = at::randn({2, 16, 3, 4, 8}).permute({2, 0, 3, 1, 4});
    return {qkv[0], qkv[1], qkv[2]};
  }
  std::vector<at::Tensor> qkv;
  for (int i = 0; i < 3; ++i) {
    switch (layout) {
      case Layout::kViews:
        qkv.push_back(at::randn({2, 16, 4, 8}).transpose(1, 2));
        break;
      case Layout::kSliced:
        qkv.push_back(at::randn({2, 4, 16, 16}).narrow(3, 0, 8));
        break;
      case Layout::kPermuted:
        qkv.push_back(at::randn({16, 2, 4, 8}).permute({1, 2, 0, 3}));
        break;
      default:
        qkv.push_back(at::randn({2, 4, 16, 8}));
    }
  }
  return qkv;
}

TEST_F(MetaKernels, TheKernelChoiceIsTheCpus) {
  for (const Layout layout : kLayouts) {
    const std::vector<at::Tensor> qkv = attention_inputs(layout);
    const at::Tensor q = on_meta(qkv[0]), k = on_meta(qkv[1]), v = on_meta(qkv[2]);
    const at::Tensor mask = at::rand({16, 16}) > 0.5;
    const struct {
      std::optional<at::Tensor> mask;
      double dropout;
      bool causal;
    } cases[] = {{std::nullopt, 0.0, true}, {std::nullopt, 0.1, false}, {mask, 0.0, false}};
    for (const auto& c : cases) {
      const std::optional<at::Tensor> meta_mask =
          c.mask ? std::optional<at::Tensor>(on_meta(*c.mask)) : std::nullopt;
      const int64_t cpu_choice =
          at::_fused_sdp_choice(qkv[0], qkv[1], qkv[2], c.mask, c.dropout, c.causal);
      EXPECT_EQ(at::_fused_sdp_choice(q, k, v, meta_mask, c.dropout, c.causal), cpu_choice)
          << "dropout " << c.dropout << ", mask " << c.mask.has_value() << ", layout "
          << static_cast<int>(layout);
    }
  }
  // Both kernels are chosen among these cases: the CPU's flash kernel and the math path.
  const std::vector<at::Tensor> qkv = attention_inputs(Layout::kContiguous);
  EXPECT_EQ(
      at::_fused_sdp_choice(qkv[0], qkv[1], qkv[2], std::nullopt, 0.0, true),
      static_cast<int64_t>(SdpBackend::flash_attention));
  EXPECT_EQ(
      at::_fused_sdp_choice(qkv[0], qkv[1], qkv[2], std::nullopt, 0.1, false),
      static_cast<int64_t>(SdpBackend::math));
}

TEST_F(MetaKernels, TheCpusFlashAttentionAndItsBackwardAsOnTheCpu) {
  for (const Layout layout : kLayouts) {
    const std::vector<at::Tensor> qkv = attention_inputs(layout);
    const at::Tensor q = on_meta(qkv[0]), k = on_meta(qkv[1]), v = on_meta(qkv[2]);
    const std::string what = "layout " + std::to_string(static_cast<int>(layout));
    const auto cpu = at::_scaled_dot_product_flash_attention_for_cpu(qkv[0], qkv[1], qkv[2]);
    const auto meta = at::_scaled_dot_product_flash_attention_for_cpu(q, k, v);
    expect_like(std::get<0>(meta), std::get<0>(cpu), "output, " + what);
    expect_like(std::get<1>(meta), std::get<1>(cpu), "log-sum-exp, " + what);
    const at::Tensor grad = at::randn({2, 4, 16, 8});
    const auto cpu_back = at::_scaled_dot_product_flash_attention_for_cpu_backward(
        grad, qkv[0], qkv[1], qkv[2], std::get<0>(cpu), std::get<1>(cpu), 0.0, true);
    const auto meta_back = at::_scaled_dot_product_flash_attention_for_cpu_backward(
        on_meta(grad), q, k, v, std::get<0>(meta), std::get<1>(meta), 0.0, true);
    expect_like(std::get<0>(meta_back), std::get<0>(cpu_back), "dq, " + what);
    expect_like(std::get<1>(meta_back), std::get<1>(cpu_back), "dk, " + what);
    expect_like(std::get<2>(meta_back), std::get<2>(cpu_back), "dv, " + what);
  }
}

TEST_F(MetaKernels, ScaledDotProductAttentionRunsTheCpusKernelWithItsGradients) {
  for (const double dropout : {0.0, 0.1}) {  // the CPU's flash kernel, then the math path
    std::vector<at::Tensor> cpu = attention_inputs(Layout::kSplit), meta;
    for (at::Tensor& t : cpu) {
      meta.push_back(on_meta(t).requires_grad_(true));
      t.requires_grad_(true);
    }
    const at::Tensor cpu_out =
        at::scaled_dot_product_attention(cpu[0], cpu[1], cpu[2], {}, dropout, dropout == 0.0);
    const at::Tensor meta_out =
        at::scaled_dot_product_attention(meta[0], meta[1], meta[2], {}, dropout, dropout == 0.0);
    const std::string what = "dropout " + std::to_string(dropout);
    expect_like(meta_out, cpu_out, "output, " + what);
    ASSERT_NE(meta_out.grad_fn(), nullptr) << what;
    EXPECT_EQ(meta_out.grad_fn()->name(), cpu_out.grad_fn()->name()) << what;
    cpu_out.sum().backward();
    meta_out.sum().backward();
    for (size_t i = 0; i < 3; ++i)
      expect_like(meta[i].grad(), cpu[i].grad(), "gradient " + std::to_string(i) + ", " + what);
  }
}

TEST_F(MetaKernels, MultinomialAsOnTheCpu) {
  const at::Tensor p = at::rand({3, 10});
  expect_like(at::multinomial(on_meta(p), 2), at::multinomial(p, 2), "multinomial [3, 10]");
  const at::Tensor v = at::rand({10});
  expect_like(at::multinomial(on_meta(v), 4), at::multinomial(v, 4), "multinomial [10]");
}

TEST_F(MetaKernels, ReluAsOnTheCpu) {
  const at::Tensor x = at::randn({6, 4}).t();  // strided: the output follows the input
  expect_like(at::relu(on_meta(x)), at::relu(x), "relu");
  at::Tensor cpu = x.clone(), meta = on_meta(cpu);
  const int64_t before = meta_allocated();
  at::relu_(meta);
  at::relu_(cpu);
  EXPECT_EQ(meta_allocated(), before) << "in place";
  expect_like(meta, cpu, "relu_");
}

TEST_F(MetaKernels, ConvolutionForwardAndBackwardAsOnTheCpu) {
  struct Case {
    std::vector<int64_t> input, weight;
    int64_t stride, padding;
    bool transposed, channels_last, weight_channels_last = false;
  };
  const Case cases[] = {
      {{2, 3, 16, 16}, {8, 3, 3, 3}, 1, 1, false, false},
      {{2, 3, 17, 15}, {8, 3, 4, 4}, 2, 1, false, true},
      {{2, 8, 4, 4}, {8, 3, 4, 4}, 2, 1, true, false},  // a DCGAN generator's up-sampling
      {{2, 16, 1, 1}, {16, 8, 4, 4}, 1, 0, true, false},
      {{2, 3, 16, 16}, {8, 3, 3, 3}, 1, 1, false, false, true},  // the weight channels last
  };
  for (const Case& c : cases) {
    at::Tensor x = at::randn(c.input);
    if (c.channels_last)
      x = x.contiguous(at::MemoryFormat::ChannelsLast);
    const at::Tensor w = c.weight_channels_last
                             ? at::randn(c.weight).contiguous(at::MemoryFormat::ChannelsLast)
                             : at::randn(c.weight),
                     b = at::randn({c.transposed ? c.weight[1] : c.weight[0]});
    const std::vector<int64_t> stride(2, c.stride), padding(2, c.padding), none(2, 0), one(2, 1);
    const at::Tensor cpu = at::convolution(x, w, b, stride, padding, one, c.transposed, none, 1);
    const at::Tensor mx = on_meta(x), mw = on_meta(w);
    const at::Tensor meta =
        at::convolution(mx, mw, on_meta(b), stride, padding, one, c.transposed, none, 1);
    const std::string what = std::string(c.transposed ? "transposed " : "") + "convolution " +
                             std::to_string(c.input[2]) + "x" + std::to_string(c.input[3]);
    expect_like(meta, cpu, what);
    const at::Tensor g = at::randn(cpu.sizes());
    const std::vector<int64_t> bias_sizes = {b.size(0)};
    const auto cpu_back = at::convolution_backward(
        g, x, w, bias_sizes, stride, padding, one, c.transposed, none, 1, {true, true, true});
    const auto meta_back = at::convolution_backward(
        on_meta(g),
        mx,
        mw,
        bias_sizes,
        stride,
        padding,
        one,
        c.transposed,
        none,
        1,
        {true, true, true});
    expect_like(std::get<0>(meta_back), std::get<0>(cpu_back), what + " grad input");
    expect_like(std::get<1>(meta_back), std::get<1>(cpu_back), what + " grad weight");
    expect_like(std::get<2>(meta_back), std::get<2>(cpu_back), what + " grad bias");
  }
}

TEST_F(MetaKernels, BatchNormForwardAndBackwardAsOnTheCpu) {
  for (const bool training : {true, false}) {
    const at::Tensor x = at::randn({4, 3, 8, 8}), w = at::randn({3}), b = at::randn({3});
    at::Tensor rm = at::zeros({3}), rv = at::ones({3});
    const auto cpu = at::native_batch_norm(x, w, b, rm, rv, training, 0.1, 1e-5);
    const at::Tensor mx = on_meta(x), mw = on_meta(w);
    const auto meta =
        at::native_batch_norm(mx, mw, on_meta(b), on_meta(rm), on_meta(rv), training, 0.1, 1e-5);
    const std::string what = training ? "training" : "evaluation";
    expect_like(std::get<0>(meta), std::get<0>(cpu), "out, " + what);
    expect_like(std::get<1>(meta), std::get<1>(cpu), "save_mean, " + what);
    expect_like(std::get<2>(meta), std::get<2>(cpu), "save_invstd, " + what);
    if (!training)
      continue;
    const at::Tensor g = at::randn({4, 3, 8, 8});
    const auto cpu_back = at::native_batch_norm_backward(
        g, x, w, rm, rv, std::get<1>(cpu), std::get<2>(cpu), true, 1e-5, {true, true, true});
    const auto meta_back = at::native_batch_norm_backward(
        on_meta(g),
        mx,
        mw,
        on_meta(rm),
        on_meta(rv),
        std::get<1>(meta),
        std::get<2>(meta),
        true,
        1e-5,
        {true, true, true});
    expect_like(std::get<0>(meta_back), std::get<0>(cpu_back), "grad input");
    expect_like(std::get<1>(meta_back), std::get<1>(cpu_back), "grad weight");
    expect_like(std::get<2>(meta_back), std::get<2>(cpu_back), "grad bias");
  }
}

TEST_F(MetaKernels, LogSigmoidAndItsBackwardAsOnTheCpu) {
  const at::Tensor x = at::randn({4, 6});
  const auto cpu = at::log_sigmoid_forward(x);
  const auto meta = at::log_sigmoid_forward(on_meta(x));
  expect_like(std::get<0>(meta), std::get<0>(cpu), "log_sigmoid output");
  expect_like(std::get<1>(meta), std::get<1>(cpu), "log_sigmoid buffer");
  expect_like(
      at::log_sigmoid_backward(on_meta(x), on_meta(x), std::get<1>(meta)),
      at::log_sigmoid_backward(x, x, std::get<1>(cpu)),
      "log_sigmoid_backward");
}

// A DCGAN's generator and discriminator (transposed convolutions, batch norm, relu, tanh;
// convolutions, leaky relu, the logits' binary cross-entropy) train a step on the Meta device,
// every storage counted: what a conv net needs runs on shapes alone.
TEST_F(MetaKernels, ADcganTrainsAStepOnShapesAlone) {
  const at::TensorOptions meta = at::TensorOptions().device(at::kMeta);
  const auto param = [&](std::vector<int64_t> shape) {
    return at::empty(shape, meta).requires_grad_(true);
  };
  const at::Tensor g1 = param({16, 8, 4, 4}), g2 = param({8, 3, 4, 4}), gamma = param({8}),
                   beta = param({8}), d1 = param({8, 3, 4, 4}), d2 = param({1, 8, 8, 8});
  const int64_t before = meta_allocated();
  const at::Tensor z = at::empty({4, 16, 1, 1}, meta);
  at::Tensor h = at::conv_transpose2d(z, g1, {}, 1, 0);  // [4, 8, 4, 4]
  h = at::relu(at::batch_norm(h, gamma, beta, {}, {}, true, 0.1, 1e-5, false));
  const at::Tensor fake = at::tanh(at::conv_transpose2d(h, g2, {}, 4, 0));  // [4, 3, 16, 16]
  at::Tensor d = at::leaky_relu(at::conv2d(fake, d1, {}, 2, 1), 0.2);       // [4, 8, 8, 8]
  const at::Tensor logits = at::conv2d(d, d2).flatten();                    // [4]
  const at::Tensor loss = at::binary_cross_entropy_with_logits(logits, at::empty({4}, meta));
  EXPECT_GT(meta_allocated(), before) << "the forward's activations are counted";
  loss.backward();
  for (const at::Tensor& p : {g1, g2, gamma, beta, d1, d2}) {
    ASSERT_TRUE(p.grad().defined());
    EXPECT_EQ(p.grad().sizes(), p.sizes());
  }
}

TEST_F(MetaKernels, AValueReadGetsTheStandInOfItsDtype) {
  EXPECT_EQ(at::_local_scalar_dense(on_meta(at::ones({}))).toDouble(), 0.0);
  EXPECT_EQ(on_meta(at::ones({1}, at::kLong)).item<int64_t>(), 0);
  EXPECT_FALSE(on_meta(at::ones({}, at::kBool)).item<bool>());
}

TEST_F(MetaKernels, EveryMetaStorageIsCountedAndOneResizeGrowsToo) {
  const int64_t before = meta_allocated();
  at::Tensor t = at::empty({256, 256}, at::TensorOptions().device(at::kMeta));
  EXPECT_EQ(meta_allocated() - before, 256 * 256 * 4);
  t.resize_({512, 512});  // grows: a new storage, the old one freed
  EXPECT_EQ(meta_allocated() - before, 512 * 512 * 4);
  EXPECT_EQ(t.storage().nbytes(), 512u * 512u * 4u);
  t.resize_({16, 16});  // shrinks: the storage stays, as on the CPU
  EXPECT_EQ(meta_allocated() - before, 512 * 512 * 4);
  at::Tensor cpu = at::empty({256, 256});
  cpu.resize_({512, 512});
  cpu.resize_({16, 16});
  expect_like(t, cpu, "resized");
  t = at::Tensor();
  EXPECT_EQ(meta_allocated(), before);
}

TEST_F(MetaKernels, FusedAdamWRunsInPlaceAndMakesNothing) {
  const auto meta_list = [](int n) {
    std::vector<at::Tensor> list;
    for (int i = 0; i < n; ++i)
      list.push_back(at::empty({64}, at::TensorOptions().device(at::kMeta)));
    return list;
  };
  const std::vector<at::Tensor> params = meta_list(3), grads = meta_list(3), m = meta_list(3),
                                v = meta_list(3), steps = meta_list(3);
  const int64_t before = meta_allocated();
  at::_fused_adamw_(params, grads, m, v, {}, steps, 1e-3, 0.9, 0.999, 0.01, 1e-8, false, false);
  EXPECT_EQ(meta_allocated(), before);
  // The overload with the learning rate in a tensor (a scheduler's), too.
  const at::Tensor lr = at::empty({}, at::TensorOptions().device(at::kMeta));
  const int64_t with_lr = meta_allocated();
  at::_fused_adamw_(params, grads, m, v, {}, steps, lr, 0.9, 0.999, 0.01, 1e-8, false, false);
  EXPECT_EQ(meta_allocated(), with_lr);
}

TEST_F(MetaKernels, AnOperatorWithoutOneIsNamed) {
  try {
    at::nonzero(on_meta(at::ones({4})));
    FAIL() << "nonzero ran on Meta";
  } catch (const std::exception& e) {
    EXPECT_EQ(refused_operator(e), "aten::nonzero") << e.what();
  }
  EXPECT_EQ(refused_operator(std::runtime_error("something else")), "");
}

}  // namespace
}  // namespace oomguard::meta
