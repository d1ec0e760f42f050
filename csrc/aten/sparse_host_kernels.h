// Sparse ops whose CPU kernel is CPU-specific (CUDA has its own: coalesce,
// sparse x dense matmul, index_select, sampled_addmm, ...) run as device
// kernels over host views: inside the kernel, every sparse argument becomes
// a CPU sparse tensor over host views of its indices and values (no copy),
// and the CPU sparse kernel runs on it.
//
// These ops' outputs mostly have a data-dependent number of specified
// elements and no Meta kernel, so, like the device-kernel path's ops with
// data-dependent shapes, the call synchronizes with the kernel and moves
// the kernel's results to the device (through copies, never a host read of
// device memory).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/Device.h>

namespace mydev {

// Runs `op` on `device` as described above, leaving its returns on `stack`.
void runSparseOnHostViews(const c10::OperatorHandle& op,
                          torch::jit::Stack* stack, c10::Device device);

}  // namespace mydev
