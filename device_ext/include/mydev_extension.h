// The C++ API of libtorch_mydev.so for code built outside this project: a
// third-party op's mydev kernels (examples/extension_cpp) or a C++ program.
// Build against device_ext.cpp_extension.include_paths() and link
// -ltorch_mydev from device_ext.cpp_extension.library_paths().
//
// A mydev kernel is host code that the stream's executor runs later, in
// stream order, exactly where a GPU kernel would run. Device pointers (a mydev
// tensor's data_ptr()) are opaque to the host: outside a kernel, never read or
// write through them. Inside a kernel, reach device memory through
// kernelPointer() or kernelView(). The rest of the integration (allocator,
// streams, the op registrations) is in place as soon as the library is loaded.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Stream.h>

#include <functional>
#include <utility>

namespace mydev::ext {

// The calling thread's current stream on mydev device `device` (-1: the
// current device): torch.mydev.current_stream() as C++ sees it.
c10::Stream currentStream(c10::DeviceIndex device = -1);

// Enqueues `kernel` on `stream`, a mydev stream, after the work already
// queued there, and returns at once: the kernel runs later, on the stream's
// executor. `name` must outlive the kernel (use a string literal): errors
// quote it. An exception the kernel throws (TORCH_CHECK) is raised with its
// type by the next synchronizing call (tensor.cpu(), torch.mydev.synchronize())
// and the device stays usable, as with an asynchronous CUDA error.
//
// The kernel captures plain values: kernel pointers or kernel views made when
// launching, never owning tensors. The caching allocator keeps freed memory
// safe to reuse in stream order, as on CUDA.
void launchKernel(const char* name, c10::Stream stream,
                  std::function<void()> kernel);

// The same, on the current stream of the current device.
inline void launchKernel(const char* name, std::function<void()> kernel) {
  launchKernel(name, currentStream(), std::move(kernel));
}

// The address a kernel reaches device pointer `device_pointer` at (the
// driver's translation, mydevKernelPointer). Computing it on the host is
// fine; dereferencing it is only allowed inside a kernel.
void* kernelPointer(const void* device_pointer);

// A CPU tensor over the same bytes as the mydev tensor `device_tensor` (same
// sizes, strides, dtype), at their kernel-side address, so a kernel can run
// ATen's CPU kernels on device memory without a copy. Make it when launching;
// touch its data only inside the kernel.
at::Tensor kernelView(const at::Tensor& device_tensor);

}  // namespace mydev::ext
