// The fused custom ops' C++ entry points, bound in csrc/python/module.cpp and
// called by the torch.library.custom_op definitions in device_ext/ops/. Each
// takes mydev tensors (the kernel is enqueued on the current stream of their
// device; the call returns at once) or CPU tensors (the same kernel runs
// right here). Inputs that are not contiguous are made contiguous first, on
// their device. Outputs are new contiguous tensors.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <tuple>

namespace mydev::custom_ops {

// x [..., hidden], weight [hidden]: x * rsqrt(mean(x^2, -1) + eps) * weight,
// in x's dtype (weight: x's dtype or float32; math in float32).
at::Tensor rmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps);
// (grad_x, grad_weight).
std::tuple<at::Tensor, at::Tensor> rmsNormBackward(const at::Tensor& grad_out,
                                                   const at::Tensor& x,
                                                   const at::Tensor& weight,
                                                   double eps);

// silu(gate) * up, gate and up of one shape and dtype.
at::Tensor swiglu(const at::Tensor& gate, const at::Tensor& up);
// (grad_gate, grad_up).
std::tuple<at::Tensor, at::Tensor> swigluBackward(const at::Tensor& grad_out,
                                                  const at::Tensor& gate,
                                                  const at::Tensor& up);

// x [..., seq, head_dim] (head_dim even); cos and sin of one shape that
// broadcasts to x's, with head_dim last (e.g. [seq, head_dim] or
// [batch, 1, seq, head_dim]); dtype x's or float32.
// x * cos + rotate_half(x) * sin, rotate_half(x) = cat(-x2, x1).
at::Tensor rotaryEmbedding(const at::Tensor& x, const at::Tensor& cos,
                           const at::Tensor& sin);
// grad_x of rotaryEmbedding (the op is linear in x; cos/sin get no gradient
// here).
at::Tensor rotaryEmbeddingBackward(const at::Tensor& grad_out,
                                   const at::Tensor& cos,
                                   const at::Tensor& sin);

// The vector ISA the kernels were picked for: "DEFAULT", "AVX2" or "AVX512".
std::string fusedKernelsIsa();

}  // namespace mydev::custom_ops
