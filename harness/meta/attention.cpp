// Meta kernels of scaled-dot-product attention (harness/meta/kernels.h).
#include "harness/meta/kernels.h"
#include "harness/meta/sdp_backend.h"

#include <optional>
#include <tuple>

#include <limits>

#include <ATen/OpMathType.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/_fused_sdp_choice.h>
#include <ATen/ops/_scaled_dot_product_attention_math.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <c10/util/Exception.h>

namespace oomguard::meta {
namespace {

// A CPU tensor with `t`'s sizes, strides and dtype and no storage behind them: what the CPU's
// kernel choice reads (shapes, strides, dtypes), without a byte allocated.
at::Tensor shaped_on_cpu(const at::Tensor& t) {
  if (!t.defined())
    return t;
  at::Tensor cpu = at::empty({0}, t.options().device(at::kCPU));
  cpu.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides());
  return cpu;
}

// The kernel LibTorch's CPU would pick for these shapes (flash, or the math path): a run on
// the Meta device allocates what the CPU's run does, and the sdpa_attention rule puts what
// the card's kernel keeps in place of either, as it does on the CPU.
int64_t fused_sdp_choice(
    const at::Tensor& query,
    const at::Tensor& key,
    const at::Tensor& value,
    const std::optional<at::Tensor>& attn_mask,
    double dropout_p,
    bool is_causal,
    std::optional<double> scale,
    bool enable_gqa) {
  std::optional<at::Tensor> mask;
  if (attn_mask.has_value())
    mask = shaped_on_cpu(*attn_mask);
  return at::_fused_sdp_choice(
      shaped_on_cpu(query),
      shaped_on_cpu(key),
      shaped_on_cpu(value),
      mask,
      dropout_p,
      is_causal,
      scale,
      enable_gqa);
}

// LibTorch's _scaled_dot_product_flash_attention_cpu: the output laid out as the query is
// (empty_like: its strides where it is dense, else its dimensions' order made dense) and the
// log-sum-exp [B, T, H] (in the op-math dtype) returned transposed to [B, H, T].
std::tuple<at::Tensor, at::Tensor> flash_attention(
    const at::Tensor& query,
    const at::Tensor& key,
    const at::Tensor& value,
    double /*dropout_p*/,
    bool /*is_causal*/,
    const std::optional<at::Tensor>& /*attn_mask*/,
    std::optional<double> /*scale*/) {
  TORCH_CHECK(
      query.dim() == 4 && key.dim() == 4 && value.dim() == 4,
      "scaled_dot_product_flash_attention_flash_attention: Accept only 4 dims inputs shape of "
      "{B, H, T, K}");
  TORCH_CHECK(
      query.size(3) == key.size(3) && query.size(3) == value.size(3),
      "scaled_dot_product_attention_flash_attention: Q/K/V should have the same head size");
  const int64_t batch = query.size(0), heads = query.size(1), length = query.size(2);
  at::Tensor output = at::empty_like(query);
  at::Tensor logsumexp = at::empty(
      {batch, length, heads}, query.options().dtype(at::toOpMathType(query.scalar_type())));
  return {output, logsumexp.transpose(1, 2)};
}

// LibTorch's _scaled_dot_product_flash_attention_cpu_backward: the three gradients as zeros
// of the inputs' [B, T, H, D], returned transposed.
std::tuple<at::Tensor, at::Tensor, at::Tensor> flash_attention_backward(
    const at::Tensor& grad_out,
    const at::Tensor& query,
    const at::Tensor& key,
    const at::Tensor& value,
    const at::Tensor& /*out*/,
    const at::Tensor& /*logsumexp*/,
    double /*dropout_p*/,
    bool /*is_causal*/,
    const std::optional<at::Tensor>& /*attn_mask*/,
    std::optional<double> /*scale*/) {
  if (!grad_out.defined())
    return {};
  const auto grad_of = [](const at::Tensor& t) {
    return at::zeros(t.transpose(1, 2).sizes(), t.options()).transpose(1, 2);
  };
  return {grad_of(query), grad_of(key), grad_of(value)};
}

// A boolean mask as the additive one the kernels take (-inf where a position is left out).
std::optional<at::Tensor> additive_mask(
    const std::optional<at::Tensor>& mask, const at::Tensor& query) {
  if (!mask.has_value() || !mask->defined() || mask->scalar_type() != at::kBool)
    return mask;
  at::Tensor additive = at::zeros_like(*mask, query.options().dtype(query.scalar_type()));
  additive.masked_fill_(mask->logical_not(), -std::numeric_limits<double>::infinity());
  return additive;
}

// scaled_dot_product_attention on the Meta device: LibTorch asks its kernel choice of the
// device type, which on Meta is always the math path; here it is the CPU's, so the Meta run
// calls the kernel the CPU run calls (its outputs, what autograd saves, its backward).
at::Tensor scaled_dot_product_attention(
    const at::Tensor& query,
    const at::Tensor& key,
    const at::Tensor& value,
    const std::optional<at::Tensor>& attn_mask,
    double dropout_p,
    bool is_causal,
    std::optional<double> scale,
    bool enable_gqa) {
  const int64_t choice =
      fused_sdp_choice(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa);
  const std::optional<at::Tensor> mask = additive_mask(attn_mask, query);
  if (choice == static_cast<int64_t>(SdpBackend::flash_attention))
    return std::get<0>(at::_scaled_dot_product_flash_attention_for_cpu(
        query, key, value, dropout_p, is_causal, mask, scale));
  return std::get<0>(at::_scaled_dot_product_attention_math(
      query, key, value, mask, dropout_p, is_causal, std::nullopt, scale, enable_gqa));
}

}  // namespace

void register_attention(torch::Library& aten, torch::Library& autograd) {
  autograd.impl("scaled_dot_product_attention", TORCH_FN(scaled_dot_product_attention));
  aten.impl("_fused_sdp_choice", TORCH_FN(fused_sdp_choice));
  aten.impl("_scaled_dot_product_flash_attention_for_cpu", TORCH_FN(flash_attention));
  aten.impl(
      "_scaled_dot_product_flash_attention_for_cpu_backward", TORCH_FN(flash_attention_backward));
}

}  // namespace oomguard::meta
