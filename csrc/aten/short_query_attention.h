// Attention for a few query positions against a long key/value sequence:
// the decode step of a language model (one new token attending to its KV
// cache). ATen's CPU flash-attention kernel blocks queries by 32 and keys by
// 512 and sets up per-thread buffers for that; for one query row that setup
// costs several times the arithmetic. This kernel computes each row
// directly: scores, a numerically stable softmax and the weighted sum of
// values, with the same outputs as the flash kernel (output and logsumexp),
// so the flash backward runs on them unchanged.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

namespace mydev {

// Whether shortQueryAttention computes these inputs: a floating query of at
// most a few positions, matching batch and head counts, and no mask.
bool shortQueryAttentionApplies(const at::Tensor& query, const at::Tensor& key,
                                const at::Tensor& value,
                                const std::optional<at::Tensor>& attn_mask);

// Enqueues the attention of `query` over `key`/`value` ([B, H, L, E],
// [B, H, S, E], [B, H, S, Ev]) on the current stream, writing `output`
// ([B, H, L, Ev], any strides) and `logsumexp` (contiguous float [B, H, L]).
// is_causal masks key j for query i when j > i (sdpa's top-left alignment).
void shortQueryAttention(const at::Tensor& query, const at::Tensor& key,
                         const at::Tensor& value, bool is_causal,
                         std::optional<double> scale, const at::Tensor& output,
                         const at::Tensor& logsumexp);

}  // namespace mydev
