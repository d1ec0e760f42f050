// What the hand-written Meta kernels share: allocations laid out as the CPU
// kernels lay out theirs, and the checks that leave a call to the CPU kernel.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like_native.h>

#include <optional>

namespace mydev {

using OptionalTensor = std::optional<at::Tensor>;

// The kernels of floating-point math refuse other dtypes; the CPU kernel,
// run on the call, raises its own error for them.
inline void checkFloating(const at::Tensor& t, const char* op) {
  TORCH_CHECK(at::isFloatingType(t.scalar_type()), op,
              ": left to the CPU kernel (not floating point)");
}

// A backward kernel's gradient: made by `make` when the caller asked for it
// (its output_mask entry), undefined otherwise.
template <typename Make>
at::Tensor gradientIf(bool requested, Make make) {
  return requested ? make() : at::Tensor();
}

// A tensor like `t` in the given layout, as a CPU kernel's
// empty_like(t, layout) allocates its output.
inline at::Tensor emptyLikeIn(const at::Tensor& t, at::MemoryFormat layout) {
  return at::native::empty_like(t, std::nullopt, std::nullopt, std::nullopt,
                                std::nullopt, layout);
}

}  // namespace mydev
