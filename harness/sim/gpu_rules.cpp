#include <oomguard/sim/gpu_rules.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <stdexcept>
#include <utility>

namespace oomguard::sim {
namespace {

constexpr int64_t kKiB = 1024;

// Hopper's default (CublasHandlePool.cpp): sm90 from 1.13; LibTorch 2.15 gives every card of
// major 9 to 12 the same 32 MiB (Blackwell included).
bool has_large_default(int sm, TorchVersion torch) {
  if (torch.number() >= 215)
    return sm >= 90 && sm < 130;
  return sm == 90;
}

std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace

GpuRules GpuRules::parse(std::string_view text) {
  if (text == "all" || text.empty())
    return GpuRules{};
  GpuRules rules;
  rules.cublas_workspace = false;
  rules.sdpa_attention = false;
  rules.cpu_scratch = false;
  if (text == "none")
    return rules;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    std::string_view name = text.substr(start, end - start);
    start = end + 1;
    while (!name.empty() && name.front() == ' ')
      name.remove_prefix(1);
    while (!name.empty() && name.back() == ' ')
      name.remove_suffix(1);
    if (name.empty())
      continue;  // "a, b" and a trailing comma
    if (name == "cublas_workspace")
      rules.cublas_workspace = true;
    else if (name == "sdpa_attention")
      rules.sdpa_attention = true;
    else if (name == "cpu_scratch")
      rules.cpu_scratch = true;
    else
      throw std::invalid_argument(
          "unknown rule \"" + std::string(name) +
          "\"; known rules: cublas_workspace, sdpa_attention, cpu_scratch (or all, none)");
  }
  return rules;
}

std::string GpuRules::names() const {
  std::string names;
  for (const auto& [on, name] :
       {std::pair{cublas_workspace, "cublas_workspace"},
        std::pair{sdpa_attention, "sdpa_attention"},
        std::pair{cpu_scratch, "cpu_scratch"}})
    if (on)
      names += (names.empty() ? "" : ",") + std::string(name);
  return names.empty() ? "none" : names;
}

bool is_cpu_scratch_operator(std::string_view name) {
  constexpr std::string_view kAten = "aten::";
  if (name.substr(0, kAten.size()) != kAten)
    return false;
  name.remove_prefix(kAten.size());
  if (name.substr(0, 9) == "upsample_" || name.substr(0, 10) == "_upsample_")
    return true;
  for (const std::string_view op :
       {"convolution", "convolution_backward", "mkldnn_rnn_layer", "mkldnn_rnn_layer_backward"})
    if (name == op)
      return true;
  return false;
}

const char* to_string(AttentionKernel kernel) {
  switch (kernel) {
    case AttentionKernel::kFlash:
      return "flash";
    case AttentionKernel::kMemEfficient:
      return "mem-efficient";
    case AttentionKernel::kMath:
      return "math";
  }
  return "math";
}

AttentionPlan cuda_attention(const AttentionCall& call, int sm, TorchVersion torch) {
  const bool half = call.dtype == AttentionDtype::kHalf;
  const bool bf16 = call.dtype == AttentionDtype::kBFloat16;
  const bool fp32 = call.dtype == AttentionDtype::kFloat;
  const bool head_aligned = call.head_dim % 8 == 0 && call.value_dim % 8 == 0;
  const std::string card = "sm" + std::to_string(sm) + " ";
  const std::string dtype = fp32 ? "fp32" : half ? "fp16" : bf16 ? "bf16" : "other dtype";
  const int64_t b = call.batch, h = call.heads, t = call.query_length, s = call.key_length;
  AttentionPlan plan;
  if (sm >= 80 && sm <= 121 && (half || bf16) && !call.mask && head_aligned &&
      call.head_dim <= 256) {
    plan.kernel = AttentionKernel::kFlash;
    plan.why = card + dtype + ": flash";
    plan.saved = {4 * b * h * t};
    // softmax_d and the fp32 dq accumulator, rows rounded to 128 (flash_api.cpp mha_bwd).
    const int64_t rows = (t + 127) / 128 * 128;
    plan.backward_transient = {
        4 * b * h * rows, 4 * b * h * rows * ((call.head_dim + 31) / 32 * 32)};
    return plan;
  }
  const bool efficient_dtype = fp32 || half || (bf16 && sm >= 80);
  if (sm >= 50 && sm <= 121 && efficient_dtype && (fp32 || head_aligned)) {
    plan.kernel = AttentionKernel::kMemEfficient;
    plan.why = card + dtype + ": mem-efficient" +
               (sm < 80 ? " (flash needs sm80+)"
                : fp32  ? " (flash needs fp16/bf16)"
                        : " (flash takes no attn_mask)");
    if (call.needs_grad)
      plan.saved = {4 * b * h * ((t + 31) / 32 * 32)};
    // The fp32 grad_out x out product and delta, and the dQ accumulation workspace
    // (attention_backward.cu: workspace_size, about 16,400 B per 64 x 64 tile of q).
    const int64_t workspace = b * h * ((t + 63) / 64) * ((call.head_dim + 63) / 64) * 16400;
    plan.backward_transient = {4 * b * h * t * call.value_dim, 4 * b * h * t, workspace};
    return plan;
  }
  plan.kernel = AttentionKernel::kMath;
  plan.why = card + dtype + ": math (no fused kernel takes it)";
  const bool upcast = (half || bf16) && torch.number() >= 205;
  const int64_t e = fp32 || upcast ? 4 : 2;
  const int64_t n = b * h * t * s;
  plan.transient = {n * e};  // the scores, before the softmax
  plan.saved = {b * h * t * call.head_dim * e, b * h * s * call.head_dim * e, n * e};
  if (call.dropout) {
    plan.saved.push_back(n);      // the bool mask of native_dropout
    plan.saved.push_back(n * e);  // the dropped weights
  }
  if (upcast)
    plan.saved.push_back(b * h * s * call.value_dim * 4);
  plan.backward_transient = {n * e, n * e};  // the weights' gradient, the softmax's
  return plan;
}

std::string CublasWorkspace::describe() const {
  return std::to_string(handles) + (handles == 1 ? " handle x " : " handles x ") +
         with_commas(bytes_per_handle) + " B (" + why + ")";
}

int64_t parse_cublas_workspace_config(std::string_view config) {
  const std::string text(config);
  auto bad = [&](const std::string& why) {
    throw std::invalid_argument(
        "CUBLAS_WORKSPACE_CONFIG=" + text + ": " + why +
        "; expected :SIZE_KiB:COUNT pairs, e.g. :4096:8 or :4096:2:16:8");
  };
  int64_t total = 0;
  size_t i = 0;
  auto number = [&]() {
    if (i >= text.size() || text[i] != ':')
      bad("a ':' is missing at character " + std::to_string(i + 1));
    ++i;
    const size_t start = i;
    int64_t value = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) != 0) {
      value = value * 10 + (text[i] - '0');
      if (value > (int64_t{1} << 40))
        bad("a number is too large");
      ++i;
    }
    if (i == start)
      bad("a number is missing at character " + std::to_string(start + 1));
    return value;
  };
  if (text.empty())
    bad("it is empty");
  while (i < text.size()) {
    const int64_t size_kib = number();
    const int64_t count = number();
    int64_t bytes = 0;
    if (__builtin_mul_overflow(size_kib * kKiB, count, &bytes) ||
        __builtin_add_overflow(total, bytes, &total))
      bad("more bytes than a 64-bit count holds");
  }
  return total;
}

CublasWorkspace cublas_workspace(int sm, TorchVersion torch, std::string_view config, int handles) {
  CublasWorkspace w;
  w.handles = handles;
  if (!config.empty()) {
    w.bytes_per_handle = parse_cublas_workspace_config(config);
    w.why = "CUBLAS_WORKSPACE_CONFIG=" + std::string(config);
    return w;
  }
  w.bytes_per_handle =
      has_large_default(sm, torch) ? 4096 * 8 * kKiB : 4096 * kKiB * 2 + 16 * kKiB * 8;
  w.why = "default for sm" + std::to_string(sm);
  return w;
}

CublasWorkspace cublas_workspace_rule(int sm, TorchVersion torch, const GpuRules& rules) {
  if (!rules.cublas_workspace)
    return CublasWorkspace{};
  const char* config = std::getenv("CUBLAS_WORKSPACE_CONFIG");
  return cublas_workspace(sm, torch, config != nullptr ? config : "", kTrainingCublasHandles);
}

std::string cublas_workspace_config_for(int emulated_sm, TorchVersion torch) {
  return has_large_default(emulated_sm, torch) ? ":4096:8" : ":4096:2:16:8";
}

}  // namespace oomguard::sim
