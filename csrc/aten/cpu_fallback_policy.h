// What happens to an operator the device has no kernel for.
//
// The device runs every ATen operator on strided tensors as a device kernel.
// Operators from other namespaces (a user's torch.library ops, third-party
// libraries) have host-side implementations, not device kernels, and nested
// tensors are a layout the device has no kernels for, so these are
// unsupported on mydev unless the user allows running them on the CPU:
//
//   MYDEV_CPU_FALLBACK=off   (default) a clear NotImplementedError naming the
//                            operator and this switch
//   MYDEV_CPU_FALLBACK=warn  copy inputs to the CPU, run, copy results back,
//                            warning once per operator
//   MYDEV_CPU_FALLBACK=on    the same, silently
//
// Every fallback run is counted per operator (torch.mydev.cpu_fallback_counts).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <map>
#include <string>

namespace mydev {

enum class CpuFallbackPolicy { Off, Warn, On };

// MYDEV_CPU_FALLBACK, read at the first call, unless set since.
CpuFallbackPolicy cpuFallbackPolicy();
void setCpuFallbackPolicy(CpuFallbackPolicy policy);
// "off" / "warn" / "on"; anything else is an error naming `source` (the
// variable, or the argument it came from).
CpuFallbackPolicy parseCpuFallbackPolicy(const std::string& text,
                                         const char* source);

// Runs `op` on CPU copies of its arguments (dispatched to `cpu_key`, e.g.
// NestedTensorCPU for nested tensors) if the policy allows it, or raises
// NotImplementedError naming the op and `why_unsupported`.
void runOnCpuIfAllowed(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                       const char* why_unsupported,
                       c10::DispatchKey cpu_key = c10::DispatchKey::CPU);

std::map<std::string, int64_t> cpuFallbackCounts();
void resetCpuFallbackCounts();

}  // namespace mydev
