// The reduction every myccl algorithm applies to the ranks' contributions.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <vector>

namespace mydev::distributed {

// out[i] = op over parts[r][i] for `numel` elements of `dtype`, rank 0
// first (the same order on every rank, so every rank gets bit-identical
// results). float16/bfloat16 accumulate in float32 and round once; other
// dtypes reduce in their own dtype. AVG divides the sum by the number of
// parts (integers: truncating division). `out` may alias any part: the
// buffers are reduced in cache-sized chunks through a scratch accumulator,
// so each part is read once and `out` written once.
void reduceBuffers(void* out, const std::vector<const void*>& parts,
                   int64_t numel, at::ScalarType dtype,
                   c10d::ReduceOp::RedOpType op);

// reduceBuffers over contiguous host views of one dtype.
void reduceInto(const at::Tensor& out, const std::vector<at::Tensor>& parts,
                c10d::ReduceOp::RedOpType op);

}  // namespace mydev::distributed
