// The CPU-to-GPU rules: cuBLAS workspaces per handle, architecture, LibTorch version and
// CUBLAS_WORKSPACE_CONFIG, as aten/src/ATen/cuda/CublasHandlePool.cpp sizes them; the
// attention kernel a card picks (cuda/sdp_utils.cpp) and what it keeps; the rules' switch.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include <oomguard/sim/gpu_rules.h>

namespace oomguard::sim {
namespace {

constexpr TorchVersion kLibTorch210{2, 10};
constexpr TorchVersion kLibTorch215{2, 15};

TEST(CublasWorkspace, SumsTheConfigAsLibTorchDoesAndRefusesWhatItCannotParse) {
  EXPECT_EQ(parse_cublas_workspace_config(":4096:2:16:8"), 8519680);  // the pre-Hopper default
  EXPECT_EQ(parse_cublas_workspace_config(":4096:8"), 32 << 20);      // Hopper's
  EXPECT_EQ(parse_cublas_workspace_config(":16:8"), 16 * 1024 * 8);
  for (const char* bad :
       {"", "4096:8", ":4096", ":4096:", ":a:1", ":4096:8:", ":4096;8", ":1000000000:1000000000"})
    EXPECT_THROW(parse_cublas_workspace_config(bad), std::invalid_argument) << bad;
  try {
    parse_cublas_workspace_config(":4096");
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("CUBLAS_WORKSPACE_CONFIG=:4096"), std::string::npos);
  }
}

TEST(CublasWorkspace, DefaultsPerArchitectureAndVersion) {
  EXPECT_EQ(cublas_workspace(75, kLibTorch215, "", 1).bytes(), 8519680);  // T4
  EXPECT_EQ(cublas_workspace(80, kLibTorch215, "", 1).bytes(), 8519680);  // A100
  EXPECT_EQ(cublas_workspace(86, kLibTorch215, "", 1).bytes(), 8519680);
  EXPECT_EQ(cublas_workspace(90, kLibTorch215, "", 1).bytes(), 32 << 20);  // H100, H200
  EXPECT_EQ(cublas_workspace(90, kLibTorch210, "", 1).bytes(), 32 << 20);
  // Blackwell: the pre-Hopper size up to 2.10, Hopper's from 2.15.
  EXPECT_EQ(cublas_workspace(100, kLibTorch210, "", 1).bytes(), 8519680);
  EXPECT_EQ(cublas_workspace(100, kLibTorch215, "", 1).bytes(), 32 << 20);
}

TEST(CublasWorkspace, ATrainingStepHasTwoHandlesAndTheConfigWins) {
  const CublasWorkspace t4 = cublas_workspace(75, kLibTorch215, "", kTrainingCublasHandles);
  EXPECT_EQ(t4.bytes(), 2 * 8519680);
  EXPECT_EQ(t4.describe(), "2 handles x 8,519,680 B (default for sm75)");
  const CublasWorkspace set = cublas_workspace(90, kLibTorch215, ":4096:2:16:8", 2);
  EXPECT_EQ(set.bytes(), 2 * 8519680);
  EXPECT_EQ(set.describe(), "2 handles x 8,519,680 B (CUBLAS_WORKSPACE_CONFIG=:4096:2:16:8)");
}

TEST(CublasWorkspace, AConfigGivesAnotherCardTheEmulatedOnesDefault) {
  for (const int sm : {75, 80, 90, 100}) {
    const std::string config = cublas_workspace_config_for(sm, kLibTorch215);
    EXPECT_EQ(
        cublas_workspace(90, kLibTorch215, config, 1).bytes(),
        cublas_workspace(sm, kLibTorch215, "", 1).bytes())
        << "sm" << sm;
  }
}

// B 4, H 8, T = S 256, D 32: the suite's encoder.
AttentionCall encoder_call(AttentionDtype dtype, bool dropout, bool mask = false) {
  AttentionCall call;
  call.batch = 4;
  call.heads = 8;
  call.query_length = call.key_length = 256;
  call.head_dim = call.value_dim = 32;
  call.dtype = dtype;
  call.dropout = dropout;
  call.mask = mask;
  call.needs_grad = true;
  return call;
}

TEST(Attention, AT4TakesTheMemoryEfficientKernelForFp32AndFp16WithOrWithoutDropout) {
  for (const AttentionDtype dtype : {AttentionDtype::kFloat, AttentionDtype::kHalf})
    for (const bool dropout : {false, true})
      for (const bool mask : {false, true}) {
        const AttentionPlan plan =
            cuda_attention(encoder_call(dtype, dropout, mask), 75, kLibTorch215);
        EXPECT_EQ(plan.kernel, AttentionKernel::kMemEfficient) << plan.why;
        // Its log-sum-exp, [B, H, T rounded up to 32] in fp32, kept for backward.
        ASSERT_EQ(plan.saved.size(), 1u);
        EXPECT_EQ(plan.saved[0], 4 * 4 * 8 * 256);
        EXPECT_TRUE(plan.transient.empty());
      }
  AttentionCall odd = encoder_call(AttentionDtype::kFloat, false);
  odd.query_length = 100;  // rounded to 128
  EXPECT_EQ(cuda_attention(odd, 75, kLibTorch215).saved[0], 4 * 4 * 8 * 128);
  odd.needs_grad = false;  // no log-sum-exp without a gradient
  EXPECT_TRUE(cuda_attention(odd, 75, kLibTorch215).saved.empty());
}

TEST(Attention, Bf16OnAT4FallsBackToTheMathPathWhichKeepsTheWholeAttentionMatrix) {
  const int64_t n = 4 * 8 * 256 * 256, qk = 4 * 8 * 256 * 32;
  const AttentionPlan plain =
      cuda_attention(encoder_call(AttentionDtype::kBFloat16, false), 75, kLibTorch215);
  EXPECT_EQ(plain.kernel, AttentionKernel::kMath) << plain.why;
  // Upcast to fp32 from LibTorch 2.5: q and k scaled, the softmax, and a fp32 copy of v.
  EXPECT_EQ(plain.saved, (std::vector<int64_t>{qk * 4, qk * 4, n * 4, qk * 4}));
  EXPECT_EQ(plain.transient, std::vector<int64_t>{n * 4});
  const AttentionPlan dropout =
      cuda_attention(encoder_call(AttentionDtype::kBFloat16, true), 75, kLibTorch215);
  // With dropout also native_dropout's bool mask and the dropped weights.
  EXPECT_EQ(dropout.saved, (std::vector<int64_t>{qk * 4, qk * 4, n * 4, n, n * 4, qk * 4}));
  // Before 2.5 the math path ran in bf16.
  const AttentionPlan older =
      cuda_attention(encoder_call(AttentionDtype::kBFloat16, false), 75, {2, 4});
  EXPECT_EQ(older.saved, (std::vector<int64_t>{qk * 2, qk * 2, n * 2}));
}

TEST(Attention, FlashNeedsAnAmpereOrLaterCardHalfPrecisionAndNoMask) {
  const AttentionPlan flash =
      cuda_attention(encoder_call(AttentionDtype::kHalf, true), 80, kLibTorch215);
  EXPECT_EQ(flash.kernel, AttentionKernel::kFlash) << flash.why;
  EXPECT_EQ(flash.saved, std::vector<int64_t>{4 * 4 * 8 * 256});  // [B, H, T] fp32
  EXPECT_EQ(
      cuda_attention(encoder_call(AttentionDtype::kBFloat16, false), 90, kLibTorch215).kernel,
      AttentionKernel::kFlash);
  // fp32, or a mask, or a head dim not a multiple of 8: the memory-efficient kernel.
  EXPECT_EQ(
      cuda_attention(encoder_call(AttentionDtype::kFloat, false), 90, kLibTorch215).kernel,
      AttentionKernel::kMemEfficient);
  EXPECT_EQ(
      cuda_attention(encoder_call(AttentionDtype::kHalf, false, true), 80, kLibTorch215).kernel,
      AttentionKernel::kMemEfficient);
  AttentionCall odd = encoder_call(AttentionDtype::kHalf, false);
  odd.head_dim = odd.value_dim = 20;
  EXPECT_EQ(cuda_attention(odd, 80, kLibTorch215).kernel, AttentionKernel::kMath);
}

TEST(GpuRulesSwitch, AllNoneOrNamesAndUnknownNamesAreRefused) {
  EXPECT_EQ(GpuRules::parse("all").names(), "cublas_workspace,sdpa_attention,cpu_scratch");
  EXPECT_EQ(
      GpuRules::parse("cpu_scratch, cublas_workspace").names(), "cublas_workspace,cpu_scratch");
  EXPECT_EQ(GpuRules::parse("none").names(), "none");
  EXPECT_EQ(GpuRules::parse("sdpa_attention").names(), "sdpa_attention");
  EXPECT_EQ(
      GpuRules::parse("sdpa_attention,cublas_workspace").names(),
      "cublas_workspace,sdpa_attention");
  try {
    GpuRules::parse("cublas_workspace,flash");
    ADD_FAILURE() << "an unknown rule was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("unknown rule \"flash\""), std::string::npos) << e.what();
  }
}

TEST(CpuScratch, TheOperatorsWhoseCpuKernelsAllocateScratch) {
  for (const char* name :
       {"aten::convolution",
        "aten::convolution_backward",
        "aten::mkldnn_rnn_layer",
        "aten::mkldnn_rnn_layer_backward",
        "aten::upsample_nearest2d",
        "aten::upsample_bilinear2d_backward",
        "aten::_upsample_nearest_exact1d"})
    EXPECT_TRUE(is_cpu_scratch_operator(name)) << name;
  for (const char* name :
       {"aten::conv2d", "aten::mm", "aten::lstm", "aten::upsample", "convolution", "aten::", ""})
    EXPECT_FALSE(is_cpu_scratch_operator(name)) << name;
}

}  // namespace
}  // namespace oomguard::sim
