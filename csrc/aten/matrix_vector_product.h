// The device's own kernel for a float32 matrix product with one row,
// x[1, K] @ W[K, N]: every Linear of a language model's decode step (one
// token) is one. Two layouts of W: columns contiguous (a Linear's weight
// transposed, W = weight.t(): a dot product per output) and rows contiguous
// (an accumulation of scaled rows).
//
// ATen's CPU mm runs such a product as MKL's gemv (float_dot_products.h
// says why that is slow here) behind a boxed call that a replayed graph
// repeats on every replay (an argument stack copied, host views made). This
// kernel holds only device addresses, sizes and strides.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>

namespace mydev {

// Launches aten::mm (functional or out=), called with the device arguments
// `device_args`, as the matrix-vector kernel on the current stream writing
// `result` (already shaped by the op's Meta kernel) if the call qualifies:
// float32, one row, W with contiguous rows or columns, a contiguous result
// overlapping no input. Returns false, having done nothing, otherwise.
bool launchMatrixVectorProduct(const c10::OperatorHandle& op,
                               c10::ArrayRef<c10::IValue> device_args,
                               const at::Tensor& result);

}  // namespace mydev
