// The Meta kernels torch::nn's modules need (harness/meta/activations.cpp, pooling.cpp,
// losses.cpp, and the group norm, embedding bag and equal kernels) against LibTorch's CPU
// kernels: each operator runs on CPU tensors and on Meta tensors laid out as they are, and
// each output has the same sizes, strides, dtype, offset and storage bytes on both.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include <ATen/ops/_adaptive_avg_pool2d.h>
#include <ATen/ops/_adaptive_avg_pool2d_backward.h>
#include <ATen/ops/_adaptive_avg_pool3d.h>
#include <ATen/ops/_adaptive_avg_pool3d_backward.h>
#include <ATen/ops/_ctc_loss.h>
#include <ATen/ops/_ctc_loss_backward.h>
#include <ATen/ops/_embedding_bag.h>
#include <ATen/ops/_embedding_bag_backward.h>
#include <ATen/ops/_embedding_bag_dense_backward.h>
#include <ATen/ops/_embedding_bag_forward_only.h>
#include <ATen/ops/_embedding_bag_per_sample_weights_backward.h>
#include <ATen/ops/_prelu_kernel.h>
#include <ATen/ops/_prelu_kernel_backward.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/binary_cross_entropy.h>
#include <ATen/ops/binary_cross_entropy_backward.h>
#include <ATen/ops/col2im.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/fractional_max_pool3d.h>
#include <ATen/ops/fractional_max_pool3d_backward.h>
#include <ATen/ops/full.h>
#include <ATen/ops/glu_backward.h>
#include <ATen/ops/hardtanh.h>
#include <ATen/ops/hardtanh_backward.h>
#include <ATen/ops/huber_loss.h>
#include <ATen/ops/huber_loss_backward.h>
#include <ATen/ops/im2col.h>
#include <ATen/ops/log_softmax.h>
#include <ATen/ops/max_pool2d_with_indices.h>
#include <ATen/ops/max_pool3d_with_indices.h>
#include <ATen/ops/max_pool3d_with_indices_backward.h>
#include <ATen/ops/max_unpool2d.h>
#include <ATen/ops/max_unpool3d.h>
#include <ATen/ops/mse_loss_backward.h>
#include <ATen/ops/multi_margin_loss.h>
#include <ATen/ops/multi_margin_loss_backward.h>
#include <ATen/ops/multilabel_margin_loss_backward.h>
#include <ATen/ops/multilabel_margin_loss_forward.h>
#include <ATen/ops/native_group_norm.h>
#include <ATen/ops/native_group_norm_backward.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/reflection_pad2d.h>
#include <ATen/ops/reflection_pad2d_backward.h>
#include <ATen/ops/replication_pad2d_backward.h>
#include <ATen/ops/replication_pad3d_backward.h>
#include <ATen/ops/rrelu_with_noise.h>
#include <ATen/ops/smooth_l1_loss_backward.h>
#include <ATen/ops/zeros_like.h>
#include <ATen/core/Reduction.h>

#include <oomguard/meta/meta_device.h>
#include "tests/meta/on_meta.h"

namespace oomguard::meta {
namespace {

using Tensors = std::vector<at::Tensor>;
using Op = std::function<Tensors(const Tensors&)>;

// `op` on `inputs` and on their Meta twins: each output laid out as the CPU's.
void expect_as_on_the_cpu(const std::string& what, const Tensors& inputs, const Op& op) {
  Tensors meta_inputs;
  for (const at::Tensor& t : inputs)
    meta_inputs.push_back(t.defined() ? on_meta(t) : t);
  const Tensors cpu = op(inputs);
  const Tensors meta = op(meta_inputs);
  ASSERT_EQ(cpu.size(), meta.size()) << what;
  for (size_t i = 0; i < cpu.size(); ++i) {
    const std::string which = what + ", output " + std::to_string(i);
    ASSERT_EQ(meta[i].defined(), cpu[i].defined()) << which;
    if (!cpu[i].defined())
      continue;
    EXPECT_TRUE(meta[i].is_meta()) << which;
    EXPECT_EQ(meta[i].sizes(), cpu[i].sizes()) << which;
    EXPECT_EQ(meta[i].strides(), cpu[i].strides()) << which;
    EXPECT_EQ(meta[i].scalar_type(), cpu[i].scalar_type()) << which;
    EXPECT_EQ(meta[i].storage_offset(), cpu[i].storage_offset()) << which;
    EXPECT_EQ(meta[i].storage().nbytes(), cpu[i].storage().nbytes()) << which;
  }
}

class MetaModuleKernels : public ::testing::Test {
 protected:
  void SetUp() override { use_meta_device(); }
};

TEST_F(MetaModuleKernels, ActivationsAsOnTheCpu) {
  const at::Tensor x = at::randn({4, 6, 10}), w = at::rand({6, 1});
  expect_as_on_the_cpu(
      "hardtanh", {x}, [](const Tensors& t) { return Tensors{at::hardtanh(t[0], -1, 1)}; });
  expect_as_on_the_cpu("hardtanh_backward", {x, x}, [](const Tensors& t) {
    return Tensors{at::hardtanh_backward(t[0], t[1], -1, 1)};
  });
  expect_as_on_the_cpu("_prelu_kernel", {x, w}, [](const Tensors& t) {
    return Tensors{at::_prelu_kernel(t[0], t[1])};
  });
  expect_as_on_the_cpu("_prelu_kernel_backward", {x, x, w}, [](const Tensors& t) {
    const auto [a, b] = at::_prelu_kernel_backward(t[0], t[1], t[2]);
    return Tensors{a, b};
  });
  expect_as_on_the_cpu("glu_backward", {at::randn({4, 3, 10}), x}, [](const Tensors& t) {
    return Tensors{at::glu_backward(t[0], t[1], 1)};
  });
  expect_as_on_the_cpu("rrelu_with_noise", {x, at::zeros_like(x)}, [](const Tensors& t) {
    at::Tensor noise = t[1];
    return Tensors{at::rrelu_with_noise(t[0], noise, 0.1, 0.3, true)};
  });
  expect_as_on_the_cpu(
      "abs", {x.transpose(0, 2)}, [](const Tensors& t) { return Tensors{at::abs(t[0])}; });
}

TEST_F(MetaModuleKernels, FoldUnfoldAndPaddingsAsOnTheCpu) {
  const at::Tensor image = at::randn({2, 3, 8, 9});
  expect_as_on_the_cpu("im2col", {image}, [](const Tensors& t) {
    return Tensors{at::im2col(t[0], {2, 3}, {1, 1}, {0, 1}, {1, 2})};
  });
  expect_as_on_the_cpu("col2im", {at::randn({2, 12, 56})}, [](const Tensors& t) {
    return Tensors{at::col2im(t[0], {8, 9}, {2, 2}, {1, 1}, {0, 0}, {1, 1})};
  });
  expect_as_on_the_cpu("reflection_pad2d", {image}, [](const Tensors& t) {
    return Tensors{at::reflection_pad2d(t[0], {1, 2, 3, 1})};
  });
  expect_as_on_the_cpu(
      "reflection_pad2d_backward", {at::randn({2, 3, 12, 12}), image}, [](const Tensors& t) {
        return Tensors{at::reflection_pad2d_backward(t[0], t[1], {1, 2, 3, 1})};
      });
  expect_as_on_the_cpu(
      "replication_pad2d_backward", {at::randn({2, 3, 12, 12}), image}, [](const Tensors& t) {
        return Tensors{at::replication_pad2d_backward(t[0], t[1], {1, 2, 3, 1})};
      });
  const at::Tensor volume = at::randn({2, 3, 4, 5, 6});
  expect_as_on_the_cpu(
      "replication_pad3d_backward", {at::randn({2, 3, 6, 7, 8}), volume}, [](const Tensors& t) {
        return Tensors{at::replication_pad3d_backward(t[0], t[1], {1, 1, 1, 1, 1, 1})};
      });
}

TEST_F(MetaModuleKernels, PoolingsAsOnTheCpu) {
  const at::Tensor image = at::randn({2, 3, 8, 9}), volume = at::randn({2, 3, 6, 7, 8});
  expect_as_on_the_cpu("_adaptive_avg_pool2d", {image}, [](const Tensors& t) {
    return Tensors{at::_adaptive_avg_pool2d(t[0], {3, 4})};
  });
  expect_as_on_the_cpu(
      "_adaptive_avg_pool2d_backward", {at::randn({2, 3, 3, 4}), image}, [](const Tensors& t) {
        return Tensors{at::_adaptive_avg_pool2d_backward(t[0], t[1])};
      });
  expect_as_on_the_cpu("_adaptive_avg_pool3d", {volume}, [](const Tensors& t) {
    return Tensors{at::_adaptive_avg_pool3d(t[0], {2, 3, 4})};
  });
  expect_as_on_the_cpu(
      "_adaptive_avg_pool3d_backward", {at::randn({2, 3, 2, 3, 4}), volume}, [](const Tensors& t) {
        return Tensors{at::_adaptive_avg_pool3d_backward(t[0], t[1])};
      });
  const auto [pooled, where] = at::max_pool3d_with_indices(volume, {2, 2, 2});
  expect_as_on_the_cpu("max_pool3d_with_indices", {volume}, [](const Tensors& t) {
    const auto [y, i] = at::max_pool3d_with_indices(t[0], {2, 3, 2}, {2, 2, 2}, {1, 1, 1});
    return Tensors{y, i};
  });
  expect_as_on_the_cpu(
      "max_pool3d_with_indices_backward", {pooled, volume, where}, [](const Tensors& t) {
        return Tensors{at::max_pool3d_with_indices_backward(
            t[0], t[1], {2, 2, 2}, {2, 2, 2}, {0, 0, 0}, {1, 1, 1}, false, t[2])};
      });
  const at::Tensor samples = at::rand({2, 3, 3});
  const auto [fractional, picked] =
      at::fractional_max_pool3d(volume, {2, 2, 2}, {3, 3, 3}, samples);
  expect_as_on_the_cpu(
      "fractional_max_pool3d_backward", {fractional, volume, picked}, [](const Tensors& t) {
        return Tensors{at::fractional_max_pool3d_backward(t[0], t[1], {2, 2, 2}, {3, 3, 3}, t[2])};
      });
  const auto [pooled2, where2] = at::max_pool2d_with_indices(image, {2, 2});
  expect_as_on_the_cpu("max_unpool2d", {pooled2, where2}, [](const Tensors& t) {
    return Tensors{at::max_unpool2d(t[0], t[1], {8, 9})};
  });
  expect_as_on_the_cpu("max_unpool3d", {pooled, where}, [](const Tensors& t) {
    return Tensors{at::max_unpool3d(t[0], t[1], {6, 7, 8}, {2, 2, 2}, {0, 0, 0})};
  });
}

TEST_F(MetaModuleKernels, LossesAsOnTheCpu) {
  const at::Tensor x = at::randn({16, 10}), y = at::randn({16, 10}), g = at::randn({});
  const at::Tensor p = at::rand({16, 10}), q = at::rand({16, 10}), weight = at::rand({10});
  const at::Tensor classes = at::randint(10, {16}, at::kLong);
  at::Tensor labels = at::full({16, 10}, -1, at::kLong);  // 3 labels a row, then -1
  labels.narrow(1, 0, 3).copy_(at::randint(10, {16, 3}, at::kLong));
  for (const int64_t r : {at::Reduction::None, at::Reduction::Mean, at::Reduction::Sum}) {
    const std::string how = " reduction " + std::to_string(r);
    const at::Tensor grad = r == at::Reduction::None ? at::randn({16, 10}) : g;
    expect_as_on_the_cpu("mse_loss_backward" + how, {grad, x, y}, [r](const Tensors& t) {
      return Tensors{at::mse_loss_backward(t[0], t[1], t[2], r)};
    });
    expect_as_on_the_cpu("smooth_l1_loss_backward" + how, {grad, x, y}, [r](const Tensors& t) {
      return Tensors{at::smooth_l1_loss_backward(t[0], t[1], t[2], r, 1.0)};
    });
    expect_as_on_the_cpu("huber_loss" + how, {x, y}, [r](const Tensors& t) {
      return Tensors{at::huber_loss(t[0], t[1], r, 1.0)};
    });
    expect_as_on_the_cpu("huber_loss_backward" + how, {grad, x, y}, [r](const Tensors& t) {
      return Tensors{at::huber_loss_backward(t[0], t[1], t[2], r, 1.0)};
    });
    for (const bool weighted : {false, true}) {
      const std::string and_weight = how + (weighted ? " weighted" : "");
      const at::Tensor w = weighted ? weight : at::Tensor();
      expect_as_on_the_cpu("binary_cross_entropy" + and_weight, {p, q, w}, [r](const Tensors& t) {
        return Tensors{at::binary_cross_entropy(t[0], t[1], t[2], r)};
      });
      expect_as_on_the_cpu(
          "binary_cross_entropy_backward" + and_weight, {grad, p, q, w}, [r](const Tensors& t) {
            return Tensors{at::binary_cross_entropy_backward(t[0], t[1], t[2], t[3], r)};
          });
      expect_as_on_the_cpu(
          "multi_margin_loss" + and_weight, {x, classes, w}, [r](const Tensors& t) {
            return Tensors{at::multi_margin_loss(t[0], t[1], 1, 1, t[2], r)};
          });
      expect_as_on_the_cpu(
          "multi_margin_loss_backward" + and_weight,
          {r == at::Reduction::None ? at::randn({16}) : g, x, classes, w},
          [r](const Tensors& t) {
            return Tensors{at::multi_margin_loss_backward(t[0], t[1], t[2], 1, 1, t[3], r)};
          });
    }
    const auto [loss, is_target] = at::multilabel_margin_loss_forward(x, labels, r);
    expect_as_on_the_cpu(
        "multilabel_margin_loss_forward" + how, {x, labels}, [r](const Tensors& t) {
          const auto [l, i] = at::multilabel_margin_loss_forward(t[0], t[1], r);
          return Tensors{l, i};
        });
    expect_as_on_the_cpu(
        "multilabel_margin_loss_backward" + how,
        {r == at::Reduction::None ? at::randn({16}) : g, x, labels, is_target},
        [r](const Tensors& t) {
          return Tensors{at::multilabel_margin_loss_backward(t[0], t[1], t[2], r, t[3])};
        });
  }
}

// CTC with padded targets whose longest fills the padding: log_alpha as the CPU's (with
// lengths as tensors the padding's width is what Meta knows).
TEST_F(MetaModuleKernels, CtcLossAsOnTheCpuWhereTheLongestTargetFillsThePadding) {
  const at::Tensor log_probs = at::log_softmax(at::randn({30, 3, 8}), 2);
  const at::Tensor targets = at::randint(1, 8, {3, 6}, at::kLong);
  const at::Tensor input_lengths = at::full({3}, 30, at::kLong);
  const at::Tensor target_lengths = at::arange(4, 7, at::kLong);  // 4, 5, 6: 6 fills it
  const auto [nll, alpha] =
      at::_ctc_loss(log_probs, targets, input_lengths, target_lengths, 0, false);
  expect_as_on_the_cpu(
      "_ctc_loss.Tensor",
      {log_probs, targets, input_lengths, target_lengths},
      [](const Tensors& t) {
        const auto [a, b] = at::_ctc_loss(t[0], t[1], t[2], t[3], 0, false);
        return Tensors{a, b};
      });
  expect_as_on_the_cpu("_ctc_loss (lengths as lists)", {log_probs, targets}, [](const Tensors& t) {
    const auto [a, b] = at::_ctc_loss(t[0], t[1], {30, 30, 30}, {4, 5, 6}, 0, false);
    return Tensors{a, b};
  });
  expect_as_on_the_cpu(
      "_ctc_loss_backward.Tensor",
      {at::randn({3}), log_probs, targets, input_lengths, target_lengths, nll, alpha},
      [](const Tensors& t) {
        return Tensors{at::_ctc_loss_backward(t[0], t[1], t[2], t[3], t[4], t[5], t[6], 0, false)};
      });
  // Concatenated targets with lengths as tensors: their values would decide log_alpha.
  try {
    at::_ctc_loss(
        on_meta(log_probs),
        on_meta(at::randint(1, 8, {15}, at::kLong)),
        on_meta(input_lengths),
        on_meta(target_lengths),
        0,
        false);
    ADD_FAILURE() << "1-d targets ran on Meta";
  } catch (const std::exception& e) {
    EXPECT_EQ(refused_operator(e), "aten::_ctc_loss.Tensor") << e.what();
  }
}

TEST_F(MetaModuleKernels, GroupNormAsOnTheCpu) {
  const at::Tensor x = at::randn({4, 6, 5, 5}), w = at::randn({6}), b = at::randn({6});
  const auto [y, mean, rstd] = at::native_group_norm(x, w, b, 4, 6, 25, 3, 1e-5);
  expect_as_on_the_cpu("native_group_norm", {x, w, b}, [](const Tensors& t) {
    const auto [a, m, r] = at::native_group_norm(t[0], t[1], t[2], 4, 6, 25, 3, 1e-5);
    return Tensors{a, m, r};
  });
  expect_as_on_the_cpu(
      "native_group_norm_backward",
      {at::randn({4, 6, 5, 5}), x, mean, rstd, w},
      [](const Tensors& t) {
        const auto [dx, dw, db] = at::native_group_norm_backward(
            t[0], t[1], t[2], t[3], t[4], 4, 6, 25, 3, {true, true, true});
        return Tensors{dx, dw, db};
      });
}

// A case a kernel of oomguard's refuses is named as LibTorch's missing kernels are, so a run
// ends saying which operator (exit 7): sparse gradients of an embedding bag.
TEST_F(MetaModuleKernels, ASparseEmbeddingBagGradientIsRefusedByName) {
  const at::Tensor weight = on_meta(at::randn({50, 8}));
  const at::Tensor indices = on_meta(at::randint(50, {24}, at::kLong));
  const at::Tensor offsets = on_meta(at::arange(0, 24, 4, at::kLong));
  const auto [out, offset2bag, bag_size, max_indices] =
      at::_embedding_bag(weight, indices, offsets, false, 0, /*sparse=*/true);
  try {
    at::_embedding_bag_backward(
        on_meta(at::randn({6, 8})),
        indices,
        offsets,
        offset2bag,
        bag_size,
        max_indices,
        50,
        false,
        0,
        /*sparse=*/true,
        std::nullopt,
        -1);
    FAIL() << "a sparse gradient was made on Meta";
  } catch (const std::exception& e) {
    EXPECT_EQ(refused_operator(e), "aten::_embedding_bag_backward") << e.what();
  }
}

TEST_F(MetaModuleKernels, EmbeddingBagsAsOnTheCpu) {
  const at::Tensor weight = at::randn({50, 8});
  const at::Tensor indices = at::randint(50, {24}, at::kLong);
  const at::Tensor offsets = at::arange(0, 24, 4, at::kLong);  // 6 bags of 4: none empty
  for (const int64_t mode : {0, 1, 2}) {
    const std::string how = " mode " + std::to_string(mode);
    const auto [out, offset2bag, bag_size, max_indices] =
        at::_embedding_bag(weight, indices, offsets, false, mode);
    expect_as_on_the_cpu(
        "_embedding_bag" + how, {weight, indices, offsets}, [mode](const Tensors& t) {
          const auto [a, b, c, d] = at::_embedding_bag(t[0], t[1], t[2], false, mode);
          return Tensors{a, b, c, d};
        });
    expect_as_on_the_cpu(
        "_embedding_bag_forward_only" + how, {weight, indices, offsets}, [mode](const Tensors& t) {
          const auto [a, b, c, d] = at::_embedding_bag_forward_only(t[0], t[1], t[2], false, mode);
          return Tensors{a, b, c, d};
        });
    if (mode == 0)
      continue;  // the sum's offset2bag is empty: the dense backward takes it made again
    expect_as_on_the_cpu(
        "_embedding_bag_dense_backward" + how,
        {at::randn({6, 8}), indices, offset2bag, bag_size, max_indices},
        [mode](const Tensors& t) {
          return Tensors{at::_embedding_bag_dense_backward(
              t[0], t[1], t[2], t[3], t[4], 50, false, mode, std::nullopt)};
        });
  }
  const at::Tensor per_sample = at::rand({24});
  const auto [out, offset2bag, bag_size, max_indices] =
      at::_embedding_bag(weight, indices, offsets, false, 0, false, per_sample);
  expect_as_on_the_cpu(
      "_embedding_bag_per_sample_weights_backward",
      {at::randn({6, 8}), weight, indices, offsets, offset2bag},
      [](const Tensors& t) {
        return Tensors{
            at::_embedding_bag_per_sample_weights_backward(t[0], t[1], t[2], t[3], t[4], 0)};
      });
}

TEST_F(MetaModuleKernels, EqualIsTrueForTheSameTensorAlone) {
  const at::Tensor a = on_meta(at::randn({3, 4})), b = on_meta(at::randn({3, 4}));
  EXPECT_TRUE(at::equal(a, a));
  EXPECT_TRUE(at::equal(a, a.view({3, 4})));
  EXPECT_FALSE(at::equal(a, b)) << "different tensors: their values are not there";
  EXPECT_FALSE(at::equal(a, a.t().contiguous().t()));
  EXPECT_FALSE(at::equal(a, on_meta(at::randn({4, 3}))));
}

}  // namespace
}  // namespace oomguard::meta
