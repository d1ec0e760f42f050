// The conversions of Scalar arguments that ATen's CPU kernels make before
// computing, run at the call.
//
// A CPU kernel converts some of its Scalar arguments (a fill value, add's
// alpha, clamp's bounds, ...) to the dtype it computes in with a checked
// conversion, and a value that does not fit raises "value cannot be
// converted to type ... without overflow". cuda makes the same conversions
// in its kernels' host code, at the call. On mydev the CPU kernel runs
// later, on the stream, so `torch.full((2,), 300, dtype=torch.uint8)` used
// to raise at the next synchronize, worded as a kernel fault. Which
// arguments convert, and to which dtype (the computing dtype, or float for
// the Half and BFloat16 kernels that compute in float), is each kernel's
// own; tests/test_error_inputs.py holds every one listed here against the
// CPU, dtype by dtype.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/core/ScalarType.h>

#include "cpu_kernel_checks.h"

namespace mydev {

// The check for `op`'s Scalar arguments, or nullptr where its CPU kernel
// converts none that could fail. For a call that the Meta kernel accepted
// (cpuKernelCheckAfterMetaFor): each check fires only where the CPU
// kernel's checks before the conversion pass.
CpuKernelCheck scalarConversionCheckFor(const c10::OperatorName& op);

// `value` as a kernel computing in `type` converts it, raising as the CPU
// kernel does if it does not fit.
void checkScalarFits(c10::ScalarType type, const c10::Scalar& value);

// fill_'s value, as the CPU's fill_ converts it for this tensor.
void checkFillValueFits(const at::Tensor& self, const c10::Scalar& value);

}  // namespace mydev
