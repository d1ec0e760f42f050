// The simulator's "vendor kernel library": inside a kernel, device memory is
// host-addressable, so a kernel views device tensors as CPU tensors (no copy)
// and runs ATen's optimized CPU kernels on them. Only kernels may do this.
#pragma once

#include <ATen/core/Tensor.h>

namespace mydev {

// A CPU tensor over the same bytes as `device_tensor` (same sizes, strides,
// storage offset, dtype and conjugate/negative bits). Valid only inside a
// kernel.
at::Tensor hostView(const at::Tensor& device_tensor);

}  // namespace mydev
