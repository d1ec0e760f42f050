// ATen's C++ Meta kernels, called directly.
//
// `import torch` registers Python Meta kernels (torch/_meta_registrations.py)
// over the C++ ones of nearly every ATen operator, so a call dispatched to
// the Meta key runs Python, and the first such call imports torch._dynamo
// (about a second on the host thread: torch wraps those kernels in
// torch._disable_dynamo, which imports Dynamo on first use). The C++ Meta
// kernels are still in libtorch as at::meta::*, the same meta functions the
// CPU kernels run; the device-kernel path runs them for every structured op
// and a few others (native_meta_kernels.cpp), which keeps Python out of the
// ops of a program.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace mydev {

// Runs ATen's C++ Meta kernel of `op` on `stack` (its arguments as meta
// tensors), leaving the results there, and returns true; returns false,
// with the stack untouched, for ops not listed here.
bool runNativeMetaKernel(const c10::OperatorHandle& op,
                         torch::jit::Stack* stack);

// True for the ops listed here.
bool hasNativeMetaKernel(const c10::OperatorName& name);

}  // namespace mydev
