// Argument checks every myccl backend applies before it launches anything,
// so a bad call fails on the calling thread with a clear message and the
// process group stays usable.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <string>
#include <vector>

namespace mydev::distributed {

// Raised as torch.distributed.DistBackendError.
[[noreturn]] void throwDistError(const std::string& message);

// A dense, contiguous mydev tensor of a dtype myccl moves.
void checkTensor(const at::Tensor& t, const char* what);

// One tensor per rank (`role`: "input" or "output" tensors of `what`), each
// checked to be a mydev tensor with `like`'s size, dtype and device; returns
// their flat host views, which the collective's kernel reads or writes.
std::vector<at::Tensor> perRankViews(const std::vector<at::Tensor>& tensors,
                                     const at::Tensor& like, const char* what,
                                     const char* role);

void checkReduceOp(const c10d::ReduceOp& op, at::ScalarType dtype, const char* what);

}  // namespace mydev::distributed
