// Modules moved to the Meta device with to() (harness/meta/moves.cpp): every parameter and
// buffer, the handles kept, the CPU storage released, gradients left where they were; a
// module of torch::nn and one of a user's own train a step there.
#include <gtest/gtest.h>

#include <string>

#include <ATen/ops/ones.h>
#include <ATen/ops/randn.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/linear.h>

#include <oomguard/meta/meta_device.h>

namespace oomguard::meta {
namespace {

// A module of a user's own: a parameter, a buffer and two submodules registered by hand.
struct NetImpl : torch::nn::Module {
  NetImpl() {
    scale = register_parameter("scale", at::ones({4}));
    shift = register_buffer("shift", at::ones({4}));
    norm = register_module("norm", torch::nn::BatchNorm1d(4));
    fc = register_module("fc", torch::nn::Linear(4, 3));
  }
  at::Tensor forward(const at::Tensor& x) { return fc(norm(x * scale + shift)); }

  at::Tensor scale, shift;
  torch::nn::BatchNorm1d norm{nullptr};
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(Net);

class MetaMoves : public ::testing::Test {
 protected:
  void SetUp() override { use_meta_device(); }
};

TEST_F(MetaMoves, ToMetaMovesEveryParameterAndBufferKeepingTheHandles) {
  Net net;
  const at::Tensor member = net->fc->weight;  // a handle taken before the move
  const at::Storage cpu_storage = net->fc->weight.storage();
  net->fc->weight.mutable_grad() = at::ones({3, 4});

  net->to(at::kMeta);

  for (const auto& p : net->named_parameters())
    EXPECT_TRUE(p.value().is_meta()) << p.key();
  for (const auto& b : net->named_buffers())
    EXPECT_TRUE(b.value().is_meta()) << b.key();
  EXPECT_EQ(net->named_parameters().size(), 5u);  // scale, norm.weight/bias, fc.weight/bias
  EXPECT_EQ(net->named_buffers().size(), 4u);     // shift, running_mean/var, num_batches_tracked
  EXPECT_TRUE(net->scale.is_meta()) << "the member a user registered sees the Meta tensor";
  EXPECT_TRUE(member.is_meta()) << "a handle taken before the move sees it too";
  EXPECT_EQ(
      member.unsafeGetTensorImpl(), net->named_parameters()["fc.weight"].unsafeGetTensorImpl());
  EXPECT_EQ(member.sizes(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(cpu_storage.use_count(), 1u) << "the module released the CPU storage: ours is its last";
  EXPECT_TRUE(net->fc->weight.grad().device().is_cpu()) << "to() leaves gradients alone";
}

TEST_F(MetaMoves, AMovedModuleTrainsAStepOnShapesAlone) {
  Net net;
  net->to(at::kMeta);
  const at::Tensor loss = net->forward(at::randn({8, 4}, at::kMeta)).sum();
  loss.backward();
  for (const auto& p : net->named_parameters()) {
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    EXPECT_TRUE(p.value().grad().is_meta()) << p.key();
    EXPECT_EQ(p.value().grad().sizes(), p.value().sizes()) << p.key();
  }
}

TEST_F(MetaMoves, BackFromMetaIsRefusedSayingThereIsNoData) {
  torch::nn::Linear fc(4, 3);
  fc->to(at::kMeta);
  try {
    fc->to(at::kCPU);
    FAIL() << "a Meta module moved to the CPU";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("meta tensor; no data"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace oomguard::meta
