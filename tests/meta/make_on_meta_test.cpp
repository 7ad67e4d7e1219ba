// MakeOnMeta (<oomguard/meta/meta_device.h>, harness/meta/make_on_meta.cpp): factories given
// no device make Meta tensors while it lives on their thread; one given a device keeps it;
// torch::nn's modules are made with no parameter on the CPU.
#include <gtest/gtest.h>

#include <thread>

#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/eye.h>
#include <ATen/ops/full.h>
#include <ATen/ops/linspace.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/zeros.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/linear.h>
#include <torch/types.h>

#include <oomguard/memory/tracking_allocator.h>
#include <oomguard/meta/meta_device.h>

namespace oomguard::meta {
namespace {

int64_t cpu_allocated() {
  return memory::TrackingAllocator::instance().stats().allocated_bytes;
}

TEST(MakeOnMeta, FactoriesGivenNoDeviceMakeMetaTensors) {
  const MakeOnMeta on_meta;
  for (const at::Tensor& t :
       {at::empty({2, 3}),
        at::zeros({2, 3}),
        at::ones({2, 3}),
        at::randn({2, 3}),
        at::rand({2, 3}),
        at::full({2, 3}, 1.5),
        at::arange(10),
        at::eye(4),
        at::scalar_tensor(2.0),
        at::randint(5, {3}),
        at::linspace(0, 1, 5),
        torch::randn({2, 3}, torch::requires_grad())}) {
    EXPECT_TRUE(t.is_meta()) << t.sizes();
  }
  // torch::randn keeps its requires_grad, and dtypes are as asked.
  EXPECT_TRUE(torch::randn({2}, torch::requires_grad()).requires_grad());
  EXPECT_EQ(at::zeros({2}, at::kLong).scalar_type(), at::kLong);
}

TEST(MakeOnMeta, AFactoryGivenADeviceKeepsIt) {
  const MakeOnMeta on_meta;
  EXPECT_EQ(at::zeros({2}, at::TensorOptions().device(at::kCPU)).device(), at::kCPU);
  EXPECT_EQ(torch::ones({2}, torch::device(torch::kCPU)).device(), at::kCPU);
  // An operator on a tensor makes its output where its input is.
  const at::Tensor cpu = at::ones({2}, at::TensorOptions().device(at::kCPU));
  EXPECT_EQ((cpu + 1).device(), at::kCPU);
  EXPECT_EQ(at::zeros_like(cpu).device(), at::kCPU);
}

TEST(MakeOnMeta, EndsWithItsScopeNestsAndStaysOnItsThread) {
  {
    const MakeOnMeta outer;
    {
      const MakeOnMeta inner;
      EXPECT_TRUE(at::empty({1}).is_meta());
    }
    EXPECT_TRUE(at::empty({1}).is_meta()) << "the outer guard still lives";
    bool other_thread_on_cpu = false;
    std::thread([&] { other_thread_on_cpu = at::empty({1}).device() == at::kCPU; }).join();
    EXPECT_TRUE(other_thread_on_cpu);
  }
  EXPECT_EQ(at::empty({1}).device(), at::kCPU);
}

TEST(MakeOnMeta, TorchNnModulesAreMadeWithNoParameterOnTheCpu) {
  const int64_t before = cpu_allocated();
  torch::nn::Linear big(nullptr);
  torch::nn::BatchNorm1d norm(nullptr);
  {
    const MakeOnMeta on_meta;
    big = torch::nn::Linear(4096, 4096);  // 64 MiB of fp32 weight on the CPU otherwise
    norm = torch::nn::BatchNorm1d(16);
  }
  EXPECT_LT(cpu_allocated() - before, 64 * 1024) << "the CPU held what was meant for Meta";
  for (const auto& p : big->named_parameters())
    EXPECT_TRUE(p.value().is_meta()) << p.key();
  for (const auto& b : norm->named_buffers())
    EXPECT_TRUE(b.value().is_meta()) << b.key();  // num_batches_tracked: torch::tensor(0)
  const at::Tensor y = big(at::randn({8, 4096}, at::TensorOptions().device(at::kMeta)));
  y.sum().backward();
  EXPECT_TRUE(big->weight.grad().is_meta());
}

TEST(MakeOnMeta, TorchTensorOfAListIsFilledOnTheCpuAndStaysThere) {
  const MakeOnMeta on_meta;
  EXPECT_EQ(torch::tensor({1, 2, 3}).device(), at::kCPU);
  EXPECT_TRUE(torch::tensor(3).is_meta());
}

TEST(MakeOnMeta, InitialisersRunAndSparseIsRefusedByName) {
  const MakeOnMeta on_meta;
  const at::Tensor w = at::empty({64, 32});
  torch::nn::init::orthogonal_(w);
  torch::nn::init::kaiming_uniform_(w);
  torch::nn::init::xavier_normal_(w);
  EXPECT_TRUE(w.is_meta());
  try {
    torch::nn::init::sparse_(w, 0.5);
    ADD_FAILURE() << "sparse_ ran on Meta";
  } catch (const std::exception& e) {
    EXPECT_NE(refused_operator(e).find("aten::randperm"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace oomguard::meta
