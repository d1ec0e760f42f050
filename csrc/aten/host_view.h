// The simulator's "vendor kernel library": inside a kernel, device memory is
// reachable through the driver's kernel-side addresses (mydevKernelPointer),
// so a kernel views device tensors as CPU tensors (no copy) and runs ATen's
// optimized CPU kernels on them. Only kernels may touch a view's data.
#pragma once

#include <ATen/core/Tensor.h>

namespace mydev {

// A CPU tensor over the same bytes as `device_tensor` (same sizes, strides,
// storage offset, dtype and conjugate/negative bits), at the kernel-side
// address of its storage. Its data may be read or written only inside a
// kernel; on the host it may stand in for a CPU tensor of the same layout
// where only metadata is inspected. A storage without memory (resized to 0)
// gives a view whose data is an illegal address, as on silicon.
at::Tensor hostView(const at::Tensor& device_tensor);

// hostView for the arguments of ATen's own CPU kernels on the device-kernel
// path, which never restride their arguments (outputs come sized and
// strided by the Meta kernel): the view of the same bytes and layout made
// last on this thread is returned again while it is unchanged, instead of a
// new TensorImpl (making and freeing one per tensor was a fifth of a small
// op's host time). Kernels that may change their views' sizes or strides
// (third-party kernels, collectives) take hostView.
at::Tensor sharedHostView(const at::Tensor& device_tensor);

// The device address of a host view's data, for the driver calls that take
// device pointers (an IPC handle for a buffer a kernel works on).
void* deviceAddressOf(const at::Tensor& host_view);

}  // namespace mydev
