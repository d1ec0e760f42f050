// The generic device-kernel path (see device_kernel_path.cpp), callable
// directly by explicit kernels that route an op to it: ops whose composite
// kernel is not device-generic, or that PyTorch sends to an
// "overrideable" hook for non-CPU/CUDA devices.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace mydev {

// Runs `op` on the device with the arguments on `stack`, leaving its
// returns there (the boxed calling convention).
void runOnDevice(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                 torch::jit::Stack* stack);

// Raises cuda's error for a call mixing tensors of devices `a` and `b`.
[[noreturn]] void throwDeviceMismatch(c10::Device a, c10::Device b);

}  // namespace mydev
