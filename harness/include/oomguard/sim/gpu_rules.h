#pragma once
// Rules from a CPU run to a GPU one: what a CUDA run of the same code allocates through the
// caching allocator that the CPU run never does. Each rule names the PyTorch source it comes
// from and the LibTorch versions it holds for. No Torch.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <oomguard/sim/alloc_conf.h>

namespace oomguard::sim {

// What one rule added to a prediction or a budget, for reports and failure messages:
// {"cublas_workspace", 17039360, "2 handles x 8,519,680 B (default for sm75)"}.
struct RuleEffect {
  std::string name;
  int64_t bytes = 0;
  std::string detail;
};

// The rules a prediction applies; every one unless switched off.
struct GpuRules {
  bool cublas_workspace = true;
  bool sdpa_attention = true;
  bool cpu_scratch = true;

  // "all", "none", or rule names separated by commas ("cublas_workspace,sdpa_attention"):
  // the rules to apply. Throws std::invalid_argument naming an unknown rule and listing the
  // known ones.
  static GpuRules parse(std::string_view text);
  // The rules' names, comma-separated ("cublas_workspace,sdpa_attention,cpu_scratch"), or
  // "none".
  std::string names() const;
};

// cuBLAS workspaces (aten/src/ATen/cuda/CublasHandlePool.cpp, getChosenWorkspaceSize and
// getNewWorkspace): each cuBLAS handle takes one workspace through the caching allocator at
// its first GEMM and keeps it for the life of the process. Handles are per thread and
// device, so a training step has two: the forward thread's and autograd's backward thread's.
// Size per handle: CUBLAS_WORKSPACE_CONFIG when set, else 32 MiB on Hopper (sm90; from
// LibTorch 2.15 also sm100-sm120) and 4096 KiB x 2 + 16 KiB x 8 = 8,519,680 B on every other
// card (LibTorch 1.13 to 2.15). cuBLASLt shares it (TORCH_CUBLASLT_UNIFIED_WORKSPACE, 2.15).
struct CublasWorkspace {
  int64_t bytes_per_handle = 0;
  int handles = 0;
  std::string why;  // "default for sm75", or "CUBLAS_WORKSPACE_CONFIG=:4096:8"

  int64_t bytes() const { return bytes_per_handle * handles; }
  // "2 handles x 8,519,680 B (default for sm75)"
  std::string describe() const;
};

// Handles a training step's GEMMs use: the forward thread's and autograd's backward thread's.
constexpr int kTrainingCublasHandles = 2;

// Bytes of CUBLAS_WORKSPACE_CONFIG (":SIZE_KiB:COUNT" repeated, e.g. ":4096:2:16:8" =
// 8,519,680), summed as LibTorch sums it. Stricter than LibTorch, which falls back to its
// default on what it cannot parse: throws std::invalid_argument naming what is malformed.
int64_t parse_cublas_workspace_config(std::string_view config);

// The workspace of `handles` cuBLAS handles on a card of compute capability `sm` (75 for
// sm_75) under LibTorch `torch`; `config` is CUBLAS_WORKSPACE_CONFIG ("": not set).
CublasWorkspace cublas_workspace(int sm, TorchVersion torch, std::string_view config, int handles);

// The cublas_workspace rule for a training step on a card of compute capability `sm`, with
// CUBLAS_WORKSPACE_CONFIG as the environment sets it; none (0 bytes per handle) when `rules`
// has it off. Throws std::invalid_argument for a malformed CUBLAS_WORKSPACE_CONFIG.
CublasWorkspace cublas_workspace_rule(int sm, TorchVersion torch, const GpuRules& rules);

// CUBLAS_WORKSPACE_CONFIG that gives a card of compute capability `sm` the default of one of
// compute capability `emulated_sm` (":4096:2:16:8" or ":4096:8"), for emulating a card on
// another: the real run then allocates the emulated card's workspaces.
std::string cublas_workspace_config_for(int emulated_sm, TorchVersion torch);

// Scaled-dot-product attention (aten/src/ATen/native/transformers/cuda/sdp_utils.cpp,
// attention.cu, the CPU's sdp_utils_cpp.cpp and attention.cpp): a CUDA run picks its kernel by
// card, dtype, dropout and mask, and each kernel keeps other tensors for backward than the
// kernel the CPU ran (CPU: its flash kernel without dropout, which keeps the output and a
// [B,H,T] log-sum-exp; with dropout the math path, which keeps three B x H x T x S fp32
// tensors: softmax, dropout mask, dropped weights). As LibTorch 2.3 to 2.15 choose, in order:
// - flash: sm80 to sm121, fp16 or bf16, no attn_mask, head dim a multiple of 8 up to 256;
//   keeps a [B,H,T] fp32 log-sum-exp;
// - memory-efficient: sm50 to sm121, fp16 or fp32 (bf16 from sm80), fp16/bf16 head dim a
//   multiple of 8; dropout and masks allowed; keeps a [B,H,ceil(T/32)*32] fp32 log-sum-exp
//   when a gradient is needed;
// - math: everything else; keeps q and k scaled, the softmax (dropout: a bool mask and the
//   dropped weights too), in fp32 for fp16/bf16 inputs from LibTorch 2.5 (and a fp32 copy
//   of v).
// Left out: cuDNN attention (after math in the default order), the backward kernels'
// temporaries, nested (jagged) tensors, a mask's own copies.
enum class AttentionDtype { kFloat, kHalf, kBFloat16, kOther };
enum class AttentionKernel { kFlash, kMemEfficient, kMath };
const char* to_string(AttentionKernel kernel);  // "flash", "mem-efficient", "math"

struct AttentionCall {
  int64_t batch = 1, heads = 1;  // of q: [B, H, T, D] (leading dims folded into batch)
  int64_t query_length = 0, key_length = 0, head_dim = 0, value_dim = 0;
  AttentionDtype dtype = AttentionDtype::kFloat;
  bool dropout = false, mask = false;
  bool needs_grad = false;  // grad mode on and an input requires grad
};

struct AttentionPlan {
  AttentionKernel kernel = AttentionKernel::kMath;
  std::string why;                 // "sm75 fp32: flash needs sm80+ and fp16/bf16"
  std::vector<int64_t> transient;  // allocated and freed inside the call
  std::vector<int64_t> saved;      // kept for backward: freed when it runs (at once without)
  // Allocated and freed inside its backward, besides the gradients of q, k and v (the CPU
  // backward's size): approximate, from the kernels' launchers.
  std::vector<int64_t> backward_transient;
};

// The kernel a CUDA card of compute capability `sm` picks for `call`, and what it allocates
// besides its output (which is the CPU kernel's size).
AttentionPlan cuda_attention(const AttentionCall& call, int sm, TorchVersion torch);

// CPU kernels' scratch (the cpu_scratch rule): where the CPU path runs a kernel that
// allocates buffers the card's kernel for the same operator does not, only the operator's
// outputs are the card's. On the CPU, aten::convolution and convolution_backward run oneDNN
// (its scratchpad and reordered copies) or slow_conv2d / slow_conv_transpose (im2col columns),
// where cuDNN allocates the outputs and a workspace it frees at the kernel's end (not
// modelled: its size depends on the algorithm cuDNN picks on the card);
// aten::mkldnn_rnn_layer and its backward (LSTM on the CPU) allocate oneDNN's scratch besides
// the workspace they keep for backward; the upsampling kernels (aten::upsample_*,
// _upsample_*) copy their input and output. True for those operators' names.
bool is_cpu_scratch_operator(std::string_view name);

}  // namespace oomguard::sim
