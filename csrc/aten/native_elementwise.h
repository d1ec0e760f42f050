// The device's own kernels for the simplest elementwise ops: add, sub, mul,
// true div, neg and relu (with their in-place and out= forms) over dense
// tensors of one dtype, the other operand the same shape or a host scalar;
// and rsqrt and pow(x, 2), an RMSNorm's, over floating ones.
//
// Every other op runs ATen's CPU kernel over host views of device memory
// (device_kernel_path.cpp), which costs ~1.3 us per call before the first
// element (a boxed call on a copied argument stack, TensorIterator set-up,
// host-view TensorImpls). That set-up, not the arithmetic, is what a replayed
// graph of small kernels pays, and what a vendor's kernel library does not
// have. These kernels hold only device addresses, an element count and the
// scalar, and compute exactly what ATen's CPU kernels compute, element by
// element (bit-identical results).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>

#include <cstdint>

namespace mydev {

// Launches `op` (called with the device arguments `device_args`) as a
// native kernel on the current stream writing `result` (its one output, fresh
// or the in-place / out= argument, already shaped by the op's Meta kernel),
// if the call qualifies; returns false, having done nothing, if it does not.
bool launchNativeElementwise(const c10::OperatorHandle& op,
                             c10::ArrayRef<c10::IValue> device_args,
                             const at::Tensor& result);

// How many native elementwise kernels were launched (counted on the host at
// launch, not per graph replay) since the last reset: tests check which
// path a call took.
int64_t nativeElementwiseLaunches();
void resetNativeElementwiseLaunches();

}  // namespace mydev
