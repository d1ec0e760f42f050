// Checks that ATen's CPU kernels make on their arguments before computing,
// and that the ops' Meta kernels leave out, run at the call.
//
// On cuda such checks run in the kernels' host code, at the call. On mydev
// the CPU kernel runs later, on the stream, so a bad call's error used to
// come from the stream at the next synchronize, worded as a kernel fault
// (found by running every OpInfo's error inputs on the device:
// tests/test_error_inputs.py). Each check here fires only where the CPU
// kernel's earlier checks pass, and its message is the CPU kernel's (most
// are ATen's own functions: the overlap asserts, gelu's approximation
// name), so the error a call raises is the CPU's.
//
// Overlaps between a written argument and the others are found, for most
// ops, by their Meta kernels (see checkOverlapsOfWrittenArguments); the
// ones here are checked by the CPU kernel itself, not its Meta kernel.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>

namespace mydev {

// Raises what the CPU kernel would raise, before computing, for a call
// with these device arguments.
using CpuKernelCheck = void (*)(c10::ArrayRef<c10::IValue> args);

// The checks for `op`, or nullptr for the ops that need none (nearly all).
CpuKernelCheck cpuKernelCheckFor(const c10::OperatorName& op);

// The checks the CPU kernel makes only after those its Meta kernel makes
// too (index_put's values dtype; the conversions of Scalar arguments,
// scalar_conversion_checks.h): for a call the Meta kernel accepted, before
// its launch on the stream. A synchronous run makes them itself, after the
// checks that come first. nullptr for the ops that need none.
CpuKernelCheck cpuKernelCheckAfterMetaFor(const c10::OperatorName& op);

}  // namespace mydev
