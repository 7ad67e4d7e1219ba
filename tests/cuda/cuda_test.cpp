// The GPU path: the CUDA meter against the caching allocator, the emulated card (memory
// fraction), the cache release, and the phases on a device. Each test is named *Cuda, carries
// label cuda, and is skipped where no CUDA device is usable: a CPU run shows them skipped
// while still compiling and linking all of it. With OOMGUARD_DEVICE=cuda they fail there
// instead, naming why (no driver, a driver too old for this LibTorch, no device).
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>

#include <ATen/Context.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/randn.h>
#include <c10/util/Exception.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/version.h>

#include <oomguard/gtest.h>
#include <oomguard/memory/cuda_meter.h>
#include "harness/run/smoke_run.h"
#include <oomguard/models/checkpoint.h>
#include <oomguard/sim/gpu_rules.h>
#include "tests/support/fixtures.h"

namespace oomguard {
namespace {

constexpr int64_t kMiB = 1 << 20;

class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = memory::cuda_unavailable_reason();
    if (!why.empty()) {
      // A suite asked for CUDA (OOMGUARD_DEVICE=cuda, as the GPU jobs set it) fails where it
      // cannot have it, so a GPU job cannot pass having tested nothing.
      const char* device = std::getenv("OOMGUARD_DEVICE");
      if (device != nullptr && std::string(device).rfind("cuda", 0) == 0)
        GTEST_FAIL() << "OOMGUARD_DEVICE=" << device << ", but " << why;
      GTEST_SKIP() << why;
    }
    at::manual_seed(0);
    meter_ = std::make_unique<memory::CudaMeter>(0);
    meter_->set_capacity(0);
  }
  void TearDown() override {
    if (meter_)
      meter_->set_capacity(0);
  }
  memory::CudaMeter& meter() { return *meter_; }
  static at::TensorOptions on_cuda() { return at::TensorOptions().device(c10::kCUDA, 0); }

 private:
  std::unique_ptr<memory::CudaMeter> meter_;
};

TEST_F(CudaTest, CountsAllocatedAndReservedCuda) {
  const auto before = meter().stats();
  meter().reset_peak();
  {
    auto t = at::empty({kMiB / 4}, on_cuda().dtype(at::kFloat));  // 1 MiB, a 512-byte multiple
    const auto during = meter().stats();
    EXPECT_EQ(during.allocated_bytes - before.allocated_bytes, kMiB);
    EXPECT_GE(during.reserved_bytes, during.allocated_bytes);
  }
  const auto after = meter().stats();
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(after.peak_allocated_bytes - before.allocated_bytes, kMiB);
  EXPECT_GE(after.peak_reserved_bytes, after.peak_allocated_bytes);
  meter().reset_peak();
  EXPECT_EQ(meter().stats().peak_allocated_bytes, after.allocated_bytes);
}

TEST_F(CudaTest, EmulatedCardRefusesMoreThanItsCapacityCuda) {
  meter().release_cache();
  const int64_t ooms_before = meter().stats().num_ooms;
  meter().set_capacity(meter().stats().reserved_bytes + 256 * kMiB);
  try {
    auto too_much = at::empty({512 * kMiB / 4}, on_cuda().dtype(at::kFloat));
    FAIL() << "512 MiB fitted on an emulated card with 256 MiB left";
  } catch (const c10::OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("allowed"), std::string::npos) << e.what();
  }
  EXPECT_EQ(meter().stats().num_ooms, ooms_before + 1);
  auto fits = at::empty({128 * kMiB / 4}, on_cuda().dtype(at::kFloat));
  EXPECT_GE(meter().stats().allocated_bytes, 128 * kMiB);
}

TEST_F(CudaTest, ACardLargerThanTheDeviceIsRefusedCuda) {
  EXPECT_THROW(meter().set_capacity(meter().device_total_bytes() + 1), std::invalid_argument);
}

TEST_F(CudaTest, ReleaseCacheGivesFreedMemoryBackCuda) {
  { auto t = at::empty({64 * kMiB / 4}, on_cuda().dtype(at::kFloat)); }
  const int64_t cached = meter().stats().reserved_bytes;
  EXPECT_GE(cached, 64 * kMiB);  // freed, still reserved by the cache
  meter().release_cache();
  EXPECT_LE(meter().stats().reserved_bytes, cached - 64 * kMiB);
}

TEST_F(CudaTest, CheckpointReplaysTheDevicesDropoutCuda) {
  torch::nn::Linear fc(16, 64);
  torch::nn::Dropout drop(0.3);
  fc->to(c10::Device(c10::kCUDA, 0));
  const models::BlockFn block = [&](const at::Tensor& x) { return drop->forward(fc->forward(x)); };
  const at::Tensor input = at::randn({8, 16}, on_cuda());
  at::Tensor grads[2];
  for (const bool use_checkpoint : {false, true}) {
    fc->zero_grad();
    at::manual_seed(11);  // seeds the CUDA generator too
    const at::Tensor x = input.clone().requires_grad_(true);
    const at::Tensor y = use_checkpoint ? models::checkpoint(block, x) : block(x);
    (y * y).sum().backward();
    grads[use_checkpoint ? 1 : 0] = fc->weight.grad().clone();
  }
  EXPECT_LT(
      (grads[1] - grads[0]).norm().item<double>(), 1e-5 * grads[0].norm().item<double>() + 1e-12);
}

// Peaks on a GPU differ from the CPU's (cuBLAS workspaces are allocations there), so this
// checks that every phase runs and is measured; the budgets are the CPU's.
TEST_F(CudaTest, GuardedPhasesRunAndAreMeasuredCuda) {
  const run::RunConfig config = testing::small_config();
  run::RunOptions options;
  options.device.type = memory::DeviceKind::kCuda;
  const run::RunReport report = run::smoke_run(config, meter(), options);
  ASSERT_EQ(report.phases.size(), 3u);
  for (const auto& p : report.phases) {
    EXPECT_NE(p.status, memory::PhaseStatus::kOom) << p.memory.name;
    EXPECT_GT(p.memory.peak_allocated_bytes, 0) << p.memory.name;
    EXPECT_GE(p.memory.peak_reserved_bytes, p.memory.peak_allocated_bytes) << p.memory.name;
  }
  EXPECT_FALSE(report.oom.has_value());
}

// The GoogleTest layer on CUDA: with the suite's device cuda (OOMGUARD_DEVICE, as the GPU jobs
// set it) measure() reads the caching allocator's own statistics, reserved bytes included.
TEST_F(CudaTest, MeasureReadsTheCachingAllocatorCuda) {
  if (testing::meters().device() != "cuda")
    GTEST_SKIP() << "the layer's meter is " << testing::meters().device()
                 << " (OOMGUARD_DEVICE=cuda puts it on the GPU)";
  constexpr int64_t kBytes = 16 * kMiB;
  const testing::PhaseResult phase = testing::measure("alloc", [] {
    const at::Tensor t = at::empty({kBytes}, on_cuda().dtype(at::kByte));
    EXPECT_EQ(t.nbytes(), static_cast<size_t>(kBytes));
  });
  EXPECT_EQ(phase.meter, "cuda");
  EXPECT_GE(phase.growth_bytes(), kBytes);
  EXPECT_GE(phase.peak_reserved_bytes, phase.peak_allocated_bytes);
  EXPECT_TRUE(phase.oom.empty()) << phase.oom;
  EXPECT_PHASE_PEAK_BELOW(phase, "1GiB");
}

// Before its first phase the layer takes both cuBLAS handles' workspaces (Note [a test
// measures the same whatever ran before it], harness/gtest/measure.cpp): an evaluation-only
// test, which takes the forward's alone, holds both from its phase's start, as it does after
// a training test in the same process. ctest runs this test in a process of its own.
TEST_F(CudaTest, MeasureHoldsBothWorkspacesFromTheFirstPhaseCuda) {
  if (testing::meters().device() != "cuda")
    GTEST_SKIP() << "the layer's meter is " << testing::meters().device()
                 << " (OOMGUARD_DEVICE=cuda puts it on the GPU)";
  const char* config = std::getenv("CUBLAS_WORKSPACE_CONFIG");
  const sim::CublasWorkspace workspaces = sim::cublas_workspace(
      memory::cuda_compute_capability(0),
      {TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR},
      config != nullptr ? config : "",
      sim::kTrainingCublasHandles);
  const at::NoGradGuard no_grad;
  const at::Tensor x = at::randn({64, 64}, on_cuda());
  const testing::PhaseResult phase =
      testing::measure("evaluate", [&] { const at::Tensor y = at::mm(x, x); });
  EXPECT_GE(phase.start_allocated_bytes - static_cast<int64_t>(x.nbytes()), workspaces.bytes())
      << "expected " << workspaces.describe() << " live before the phase";
  EXPECT_LT(phase.growth_bytes(), workspaces.bytes_per_handle) << "a workspace taken inside";
}

}  // namespace
}  // namespace oomguard
