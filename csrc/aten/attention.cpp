// Fused scaled-dot-product attention on mydev.
//
// For a PrivateUse1 device, F.scaled_dot_product_attention asks the device's
// _fused_sdp_choice_stub for a backend and otherwise decomposes into the math
// path (a dozen ops, the full attention matrix in memory). mydev answers
// "overrideable" whenever ATen's CPU flash-attention kernel could run the
// inputs, and implements the overrideable forward and backward ops with that
// kernel on the device. torch.compile keeps the op as one extern kernel.
//
// A query of a few positions (a decode step) goes to shortQueryAttention
// instead of the flash kernel, whose blocking costs more than such a query.
//
// The overrideable ops promise output layouts (their Meta kernels: the
// output follows the query's memory layout, logsumexp is a contiguous
// [B, H, L] float tensor) that Inductor relies on, so results are put into
// those layouts when the CPU kernel produced others.
#include <ATen/SDPBackend.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_fused_sdp_choice_native.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_backward.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

#include <numeric>
#include <vector>

#include "../core/device.h"
#include "short_query_attention.h"

namespace mydev {
namespace {

int64_t chooseAttentionBackend(const at::Tensor& query, const at::Tensor& key,
                               const at::Tensor& value,
                               const std::optional<at::Tensor>& attn_mask,
                               double dropout_p, bool is_causal,
                               std::optional<double> scale, bool enable_gqa) {
  constexpr auto kMath = static_cast<int64_t>(at::SDPBackend::math);
  // The CPU's own checks look at shapes, strides, dtypes and the global
  // enable flags only, so they hold for mydev tensors (and fake ones).
  const int64_t cpu_choice = at::native::_fused_sdp_choice_cpp(
      query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa);
  if (cpu_choice != static_cast<int64_t>(at::SDPBackend::flash_attention)) {
    return kMath;
  }
  // What the overrideable op cannot express: dropout (it would need the
  // device generator's state threaded through to backward), a gradient for
  // the mask, grouped-query heads (it has no enable_gqa argument), and
  // float64 (its logsumexp is float32 by contract, the CPU kernel's float64).
  if (dropout_p > 0.0 ||
      (attn_mask.has_value() && attn_mask->requires_grad()) ||
      query.scalar_type() == at::kDouble ||
      (enable_gqa && query.sym_size(-3) != key.sym_size(-3))) {
    return kMath;
  }
  return static_cast<int64_t>(at::SDPBackend::overrideable);
}

// `result` in the layout `like_this` promises (a device copy when the CPU
// kernel chose another).
at::Tensor inLayoutOf(const at::Tensor& result, const at::Tensor& like_this) {
  if (result.strides() == like_this.strides()) {
    return result;
  }
  return like_this.copy_(result);
}

// The output layout of the overrideable op's Meta kernel: the query's dense
// stride order, with the value's head size.
at::Tensor outputLike(const at::Tensor& query, const at::Tensor& value) {
  std::vector<int64_t> sizes = query.sizes().vec();
  sizes.back() = value.size(-1);
  std::vector<int64_t> order(query.dim());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return query.stride(a) > query.stride(b);
  });
  std::vector<int64_t> permuted_sizes;
  for (int64_t dim : order) {
    permuted_sizes.push_back(sizes[dim]);
  }
  std::vector<int64_t> inverse(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    inverse[order[i]] = static_cast<int64_t>(i);
  }
  return at::empty(permuted_sizes, query.options()).permute(inverse);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt,
           c10::SymInt, at::Tensor, at::Tensor, at::Tensor>
fusedAttention(const at::Tensor& query, const at::Tensor& key,
               const at::Tensor& value,
               const std::optional<at::Tensor>& attn_bias, double dropout_p,
               bool is_causal, bool return_debug_mask,
               std::optional<double> scale) {
  TORCH_CHECK(query.dim() == 4, kDeviceName,
              " fused attention expects 4-D query, key and value, got ",
              query.dim(), "-D");
  TORCH_CHECK(
      dropout_p == 0.0, kDeviceName,
      " fused attention has no dropout; "
      "scaled_dot_product_attention uses the math path for dropout_p > 0");
  TORCH_CHECK(!return_debug_mask, kDeviceName,
              " fused attention returns no debug mask");
  const auto options = query.options();
  at::Tensor contiguous_logsumexp = at::empty(
      {query.size(0), query.size(1), query.size(2)}, options.dtype(at::kFloat));
  at::Tensor output = outputLike(query, value);
  if (shortQueryAttentionApplies(query, key, value, attn_bias)) {
    shortQueryAttention(query, key, value, is_causal, scale, output,
                        contiguous_logsumexp);
  } else {
    auto [flash_output, logsumexp] =
        at::_scaled_dot_product_flash_attention_for_cpu(
            query, key, value, dropout_p, is_causal, attn_bias, scale);
    output = inLayoutOf(flash_output, output);
    contiguous_logsumexp = inLayoutOf(logsumexp, contiguous_logsumexp);
  }
  return {output, contiguous_logsumexp, at::Tensor(), at::Tensor(),
          c10::SymInt(query.size(2)), c10::SymInt(key.size(2)),
          // No dropout, so no Philox state to hand to backward.
          at::empty({}, options.dtype(at::kLong)),
          at::empty({}, options.dtype(at::kLong)), at::Tensor()};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>
fusedAttentionBackward(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key,
    const at::Tensor& value, const at::Tensor& attn_bias,
    std::array<bool, 4> grad_input_mask, const at::Tensor& out,
    const at::Tensor& logsumexp, const at::Tensor& /*cum_seq_q*/,
    const at::Tensor& /*cum_seq_k*/, int64_t /*max_q*/, int64_t /*max_k*/,
    double dropout_p, bool is_causal, const at::Tensor& /*philox_seed*/,
    const at::Tensor& /*philox_offset*/, std::optional<double> scale) {
  TORCH_CHECK(!grad_input_mask[3], kDeviceName,
              " fused attention computes no gradient for the mask");
  const std::optional<at::Tensor> mask =
      attn_bias.defined() ? std::optional<at::Tensor>(attn_bias) : std::nullopt;
  auto [grad_query, grad_key, grad_value] =
      at::_scaled_dot_product_flash_attention_for_cpu_backward(
          grad_out, query, key, value, out, logsumexp, dropout_p, is_causal,
          mask, scale);
  return {inLayoutOf(grad_query, at::empty_like(query)),
          inLayoutOf(grad_key, at::empty_like(key)),
          inLayoutOf(grad_value, at::empty_like(value)), at::Tensor()};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_scaled_dot_product_fused_attention_overrideable", fusedAttention);
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward",
         fusedAttentionBackward);
}

}  // namespace mydev

// The registration helper the macro names lives in at::native.
namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub,
                              &mydev::chooseAttentionBackend)
}  // namespace at::native
