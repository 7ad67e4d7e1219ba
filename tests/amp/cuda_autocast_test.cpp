// CUDA autocast where oomguard stands for the card (<oomguard/amp/cuda_autocast.h>), and the
// loss scaler (<oomguard/amp/grad_scaler.h>): CUDA's policy on CPU and Meta tensors, the cast
// cache until clear_cache(), the card's bytes where the stand-in's kernels differ, the
// recompute of a checkpoint in the forward's precision.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>

#include <oomguard/amp/cuda_autocast.h>
#include <oomguard/amp/grad_scaler.h>
#include <oomguard/memory/tracking_allocator.h>
#include <oomguard/meta/meta_device.h>
#include <oomguard/models/checkpoint.h>

namespace oomguard::amp {
namespace {

memory::TrackingAllocator& cpu() {
  return memory::TrackingAllocator::instance();
}

class CudaAutocastTest : public ::testing::Test {
 protected:
  void SetUp() override {
    meta::use_meta_device();
    emulate_cuda_autocast(c10::DeviceType::CPU);
  }
  // Ends SetUp's emulation (a test that started more ends its own), the stand-in the CPU again.
  void TearDown() override {
    at::autocast::set_autocast_enabled(at::kCUDA, false);
    at::autocast::clear_cache();
    emulate_cuda_autocast(c10::DeviceType::CPU);
    end_cuda_autocast_emulation();
    end_cuda_autocast_emulation();
  }
};

TEST_F(CudaAutocastTest, CoversEveryOperatorCudaAutocastRegisters) {
  auto& dispatcher = c10::Dispatcher::singleton();
  std::set<std::string> ours;
  for (const auto& name : dispatcher.getRegistrationsForDispatchKey(c10::DispatchKey::AutocastXLA))
    ours.insert(c10::toString(name));
  std::vector<std::string> missing;
  for (const auto& name :
       dispatcher.getRegistrationsForDispatchKey(c10::DispatchKey::AutocastCUDA)) {
    const std::string text = c10::toString(name);
    // cuDNN's RNN flattens its weights into an fp16 buffer in a CUDA-only kernel.
    if (text != "aten::_cudnn_rnn" && ours.count(text) == 0)
      missing.push_back(text);
  }
  EXPECT_TRUE(missing.empty()) << "CUDA autocast has a policy for " << missing.size()
                               << " operators oomguard does not emulate, first: "
                               << (missing.empty() ? "" : missing.front());
  EXPECT_GT(ours.size(), 100U);
}

TEST_F(CudaAutocastTest, OffChangesNothing) {
  const at::Tensor x = at::randn({16, 32});
  const at::Tensor w = at::randn({8, 32}).requires_grad_();
  const int64_t before = cpu().num_allocations();
  const at::Tensor y = at::linear(x, w);
  EXPECT_EQ(y.scalar_type(), at::kFloat);
  EXPECT_EQ(cpu().num_allocations() - before, 1) << "the output alone";
  EXPECT_EQ(cached_casts(), 0);
}

TEST_F(CudaAutocastTest, LinearRunsInHalfAndItsWeightsAreCastOnce) {
  const at::Tensor x = at::randn({16, 32});
  const at::Tensor w = at::randn({8, 32}).requires_grad_();
  const at::Tensor b = at::randn({8}).requires_grad_();
  const int64_t held = cpu().stats().allocated_bytes;
  {
    CudaAutocast autocast(at::kHalf);
    EXPECT_TRUE(cuda_autocast_emulated());
    const at::Tensor y = at::linear(x, w, b);
    EXPECT_EQ(y.scalar_type(), at::kHalf);
    EXPECT_EQ(y.grad_fn()->name(), "AddmmBackward0") << "the casts sit under autograd";
    EXPECT_EQ(cached_casts(), 2) << "the weight and the bias";
    const int64_t casts_and_y = cpu().stats().allocated_bytes - held;
    const at::Tensor again = at::linear(x, w, b);
    EXPECT_EQ(cached_casts(), 2);
    EXPECT_LT(cpu().stats().allocated_bytes - held, casts_and_y + 16 * 32 * 2 + 16 * 8 * 2 + 1)
        << "the second call casts its input, not the weights again";
  }
  EXPECT_FALSE(cuda_autocast_emulated());
  EXPECT_EQ(cached_casts(), 0) << "the region's end clears the cache";
  EXPECT_EQ(cpu().stats().allocated_bytes, held) << "and the copies are released";
}

TEST_F(CudaAutocastTest, ClearCacheReleasesTheCopiesBeforeTheNextAllocation) {
  const at::Tensor w = at::randn({256, 256}).requires_grad_();
  at::autocast::set_autocast_dtype(at::kCUDA, at::kHalf);
  at::autocast::set_autocast_enabled(at::kCUDA, true);
  { const at::Tensor y = at::mm(at::randn({4, 256}), w); }
  at::autocast::set_autocast_enabled(at::kCUDA, false);
  const int64_t with_cache = cpu().stats().allocated_bytes;
  at::autocast::clear_cache();
  cpu().reset_peak();
  const at::Tensor next = at::empty({1}, at::kFloat);
  EXPECT_EQ(cpu().stats().allocated_bytes, with_cache - 256 * 256 * 2 + 4);
  EXPECT_EQ(cpu().stats().peak_allocated_bytes, with_cache)
      << "the fp16 copy of the weight is gone before the next allocation counts";
}

TEST_F(CudaAutocastTest, SoftmaxOfHalfIntoFloatReadsTheHalfInput) {
  for (const c10::DeviceType device : {c10::DeviceType::CPU, c10::DeviceType::Meta}) {
    emulate_cuda_autocast(device);
    memory::TrackingAllocator& tracker = device == c10::DeviceType::CPU
                                             ? cpu()
                                             : memory::TrackingAllocator::TrackingAllocator::meta();
    const at::Tensor x =
        at::randn({64, 1024}, at::TensorOptions(device).dtype(at::kHalf)).requires_grad_();
    for (const bool log : {false, true}) {
      const std::string what =
          std::string(c10::DeviceTypeName(device)) + (log ? " log_softmax" : " softmax");
      int64_t start = tracker.stats().allocated_bytes;
      tracker.reset_peak();
      at::Tensor y;
      {
        CudaAutocast autocast(at::kHalf);
        y = log ? at::log_softmax(x, 1) : at::softmax(x, 1);
      }
      EXPECT_EQ(y.scalar_type(), at::kFloat);
      EXPECT_EQ(tracker.stats().peak_allocated_bytes - start, 64 * 1024 * 4)
          << what << ": the fp32 output alone, no fp32 copy of the input";
      const at::Tensor grad = at::ones_like(y);
      x.mutable_grad() = at::Tensor();
      start = tracker.stats().allocated_bytes;
      tracker.reset_peak();
      y.backward(grad);
      EXPECT_EQ(x.grad().scalar_type(), at::kHalf);
      EXPECT_EQ(tracker.stats().peak_allocated_bytes - start, 64 * 1024 * 2)
          << what << ": the backward writes the fp16 gradient alone";
    }
    end_cuda_autocast_emulation();
  }
}

TEST_F(CudaAutocastTest, PoliciesOtherThanLowPrecision) {
  CudaAutocast autocast(at::kHalf);
  const at::Tensor half = at::randn({4, 4}).to(at::kHalf);
  EXPECT_EQ(at::addcmul(at::randn({4, 4}), half, half).scalar_type(), at::kFloat) << "promote";
  EXPECT_EQ(at::addcmul(half, half, half).scalar_type(), at::kHalf) << "promote";
  EXPECT_EQ(at::norm(half).scalar_type(), at::kFloat) << "fp32 with the dtype appended";
  EXPECT_EQ(at::exp(half).scalar_type(), at::kFloat) << "fp32";
  EXPECT_EQ(at::sum(half).scalar_type(), at::kFloat) << "fp32 with an unset dtype";
  EXPECT_EQ(at::sum(half, at::kHalf).scalar_type(), at::kHalf) << "a dtype given is kept";
  EXPECT_EQ(at::relu(at::randn({4})).scalar_type(), at::kFloat) << "unlisted: unchanged";
  EXPECT_EQ(at::mm(half, at::randn({4, 4}, at::kDouble).to(at::kHalf)).scalar_type(), at::kHalf);
  try {
    at::binary_cross_entropy(at::rand({4}), at::rand({4}));
    ADD_FAILURE() << "binary_cross_entropy ran under autocast";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("unsafe to autocast"), std::string::npos) << e.what();
  }
}

TEST_F(CudaAutocastTest, PromotingFp16BesideBf16IsRefusedAsPyTorchRefusesIt) {
  CudaAutocast autocast(at::kHalf);
  const at::Tensor half = at::randn({4}).to(at::kHalf);
  EXPECT_THROW(at::addcmul(half, half, at::randn({4}).to(at::kBFloat16)), c10::Error);
}

TEST_F(CudaAutocastTest, ACastFirstMadeWithoutGradCarriesItsGradientWhenReused) {
  const at::Tensor w = at::randn({8, 8}).requires_grad_();
  const at::Tensor x = at::randn({2, 8});
  at::Tensor y;
  {
    CudaAutocast autocast(at::kHalf);
    {
      at::NoGradGuard no_grad;
      at::mm(x, w);  // cached here, without grad mode
    }
    y = at::mm(x, w);
  }
  ASSERT_TRUE(y.requires_grad()) << "as PyTorch 2.15's cache: the kept copy has its gradient";
  y.to(at::kFloat).sum().backward();
  EXPECT_TRUE(w.grad().defined());
}

TEST_F(CudaAutocastTest, EndedOnTheThreadNothingIsCast) {
  end_cuda_autocast_emulation();  // SetUp's
  CudaAutocast autocast(at::kHalf);
  EXPECT_FALSE(cuda_autocast_emulated());
  EXPECT_EQ(at::mm(at::randn({2, 8}), at::randn({8, 8})).scalar_type(), at::kFloat);
}

TEST_F(CudaAutocastTest, UncountedIsThisThreadsAlone) {
  const int64_t before = cpu().num_allocations();
  std::thread other;
  {
    memory::TrackingAllocator::UncountedHere uncounted;
    const at::Tensor here = at::empty({16}, at::kFloat);
    other = std::thread([] { const at::Tensor there = at::empty({16}, at::kFloat); });
    other.join();
    EXPECT_FALSE(memory::TrackingAllocator::counted_here());
  }
  EXPECT_TRUE(memory::TrackingAllocator::counted_here());
  EXPECT_EQ(cpu().num_allocations() - before, 1) << "the other thread's, counted";
}

TEST_F(CudaAutocastTest, OnMetaOnlyMetaTensorsStandForTheCards) {
  emulate_cuda_autocast(c10::DeviceType::Meta);
  CudaAutocast autocast(at::kBFloat16);
  const at::Tensor w = at::randn({8, 32}, at::TensorOptions(at::kMeta)).requires_grad_();
  EXPECT_EQ(at::linear(at::randn({2, 32}, at::kMeta), w).scalar_type(), at::kBFloat16);
  EXPECT_EQ(at::linear(at::randn({2, 32}), at::randn({8, 32})).scalar_type(), at::kFloat)
      << "a host tensor on the Meta path is not the card's";
  end_cuda_autocast_emulation();
}

TEST_F(CudaAutocastTest, ACheckpointRecomputesInTheForwardsPrecision) {
  const at::Tensor w = at::randn({32, 32}).requires_grad_();
  std::vector<at::ScalarType> seen;
  const models::BlockFn block = [&](const at::Tensor& x) {
    at::Tensor y = at::mm(x, w);
    seen.push_back(y.scalar_type());
    return y.to(at::kFloat);
  };
  at::Tensor out;
  {
    CudaAutocast autocast(at::kHalf);
    out = models::checkpoint(block, at::randn({4, 32}).requires_grad_());
  }
  out.sum().backward();
  EXPECT_EQ(cached_casts(), 0) << "the recompute's casts leave the cache with its region";
  ASSERT_EQ(seen.size(), 2U);
  EXPECT_EQ(seen[1], at::kHalf) << "the backward's recompute ran in fp32";
  EXPECT_FALSE(at::autocast::is_autocast_enabled(at::kCUDA)) << "and the backward's state is back";
  EXPECT_EQ(w.grad().scalar_type(), at::kFloat);
}

TEST(GradScaler, ScalesUnscalesAndSkipsAnOverflowedStep) {
  const at::Tensor w = at::ones({4}).requires_grad_();
  GradScaler scaler(GradScaler::Options{1024.0, 2.0, 0.5, 2});
  const at::Tensor scaled = scaler.scale((w * 3).sum());
  EXPECT_FLOAT_EQ(scaled.item<float>(), 12.0F * 1024.0F);
  scaled.backward();
  EXPECT_FLOAT_EQ(w.grad()[0].item<float>(), 3.0F * 1024.0F);
  const int64_t before = cpu().num_allocations();
  scaler.unscale_({w});
  EXPECT_EQ(cpu().num_allocations() - before, 6)
      << "PyTorch's: the scale in fp64, its inverse, that in fp32, the inf flag, a copy of each";
  EXPECT_FLOAT_EQ(w.grad()[0].item<float>(), 3.0F);
  EXPECT_TRUE(scaler.finite());
  scaler.update();
  EXPECT_DOUBLE_EQ(scaler.current_scale(), 1024.0) << "one clean step of the interval's two";

  w.mutable_grad() = at::full({4}, std::numeric_limits<float>::infinity());
  scaler.unscale_({w});
  EXPECT_FALSE(scaler.finite());
  scaler.update();
  EXPECT_DOUBLE_EQ(scaler.current_scale(), 512.0) << "backed off after the overflow";
  scaler.unscale_({w});
  EXPECT_THROW(scaler.unscale_({w}), c10::Error) << "twice in one step";
}

TEST(GradScaler, RunsOnMeta) {
  meta::use_meta_device();
  const at::Tensor w = at::ones({4}, at::TensorOptions(at::kMeta)).requires_grad_();
  GradScaler scaler;
  scaler.scale((w * 3).sum()).backward();
  scaler.unscale_({w});
  EXPECT_TRUE(scaler.finite()) << "no value to find an inf in: the step runs";
  scaler.update();
  EXPECT_EQ(w.grad().device().type(), c10::DeviceType::Meta);
}

}  // namespace
}  // namespace oomguard::amp
