// The reduction every myccl algorithm applies to the ranks' contributions.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <vector>

namespace mydev::distributed {

// out = op over parts (rank 0 first, the same order on every rank, so every
// rank gets bit-identical results). float16/bfloat16 accumulate in float32
// and round once; other dtypes reduce in their own dtype. AVG divides the sum
// by the world size (integers: truncating division).
void reduceInto(const at::Tensor& out, const std::vector<at::Tensor>& parts,
                c10d::ReduceOp::RedOpType op);

}  // namespace mydev::distributed
