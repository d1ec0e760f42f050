// cuda's dtype coverage on a device whose kernel library is ATen's CPU
// kernels. Model code written for accelerators relies on dtypes that cuda's
// kernels support and the CPU's do not (complex32 math and convolutions,
// half/bfloat16 pooling and losses, half FFTs, bool abs, integer histc, ...;
// PyTorch's OpInfo database lists them as dtypesIfCUDA beyond dtypes).
//
// For those (op, dtype) pairs the device kernel does not call the CPU
// kernel as it is: it computes in a wider dtype the CPU supports (upcast
// host views, run the CPU kernel, write the results back in the op's own
// dtype), or, where widening would change the result, runs a kernel of its
// own written with CPU ops. Which pairs, and how, is the table in
// beyond_cpu_dtypes.cpp. (FFTs are refused earlier, by ATen's composites:
// see fft_reduced_precision.cpp.)
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <functional>
#include <optional>

namespace mydev {

// Runs inside a kernel in place of `op.callBoxed(stack)`, with the same
// contract: arguments (host views) on the stack in, the op's returns out,
// in-place and out= arguments written.
using HostKernel = std::function<void(const c10::OperatorHandle& op,
                                      torch::jit::Stack* stack)>;

// The kernel to run for `op` called with `args` when the CPU kernel lacks
// their dtype and cuda has it; nullopt when the CPU kernel serves.
std::optional<HostKernel> kernelBeyondCpuDtypes(
    const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args);

}  // namespace mydev
