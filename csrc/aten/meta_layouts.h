// What the hand-written Meta kernels share: allocations laid out as the CPU
// kernels lay out theirs.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like_native.h>

namespace mydev {

// A tensor like `t` in the given layout, as a CPU kernel's
// empty_like(t, layout) allocates its output.
inline at::Tensor emptyLikeIn(const at::Tensor& t, at::MemoryFormat layout) {
  return at::native::empty_like(t, std::nullopt, std::nullopt, std::nullopt,
                                std::nullopt, layout);
}

}  // namespace mydev
