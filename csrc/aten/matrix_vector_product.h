// The device's own kernel for float32 matrix products with one row,
// x[1, K] @ W[K, N]: every Linear of a language model's decode step (one
// token) is one, with its bias (addmm) or without (mm), and so is each
// head's attention score or value product of a decode step written as a
// batched product ([B, 1, K] @ [B, K, N], bmm). Two layouts of W: columns
// contiguous (a Linear's weight transposed, W = weight.t(): a dot product
// per output) and rows contiguous (an accumulation of scaled rows).
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

// Launches aten::mm, aten::addmm or aten::bmm (functional or out=), called
// with the device arguments `device_args`, as the matrix-vector kernel on
// the current stream writing `result` (already shaped by the op's Meta
// kernel) if the call qualifies: float32, one row (per batch), W with
// contiguous rows or columns, a contiguous row of results overlapping no
// input, and for addmm a bias of N contiguous values or one value with
// alpha and beta 1 (a Linear's). Returns false, having done nothing,
// otherwise.
bool launchMatrixVectorProduct(const c10::OperatorHandle& op,
                               c10::ArrayRef<c10::IValue> device_args,
                               const at::Tensor& result);

}  // namespace mydev
