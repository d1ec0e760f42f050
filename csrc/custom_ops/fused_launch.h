// How a fused op runs its kernel: on mydev, enqueued on the device's current
// stream; on the CPU, called right away. The pattern to copy for a new op:
//
//   at::Tensor out = at::empty(..., x.options());      // on the host thread
//   runFusedKernel("mydev::my_op", x.device(),
//                  [](const at::Tensor& x, const at::Tensor& out) {
//                    myOpOnHost(x, out);                  // the kernel
//                  },
//                  x, out);
//
// The body receives host tensors: host views of the device tensors (made
// here, on the host thread) inside the kernel, or the CPU tensors themselves.
// It captures only those non-owning views, never the device tensors: the
// caching allocator makes reuse of a freed block safe in stream order (as on
// CUDA), and a body dropping the last reference on the executor thread would
// re-enter the allocator from there (see kernel_launch.h). Outputs and
// workspaces are allocated before the launch, by the caller.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>

#include <tuple>
#include <utility>

#include "../aten/host_view.h"
#include "../aten/kernel_launch.h"
#include "../core/device.h"

namespace mydev::custom_ops {

// `name` must be a string literal: kernel errors quote it.
template <typename Body, typename... Tensors>
void runFusedKernel(const char* name, c10::Device device, Body body,
                    const Tensors&... tensors) {
  if (device.is_cpu()) {
    body(tensors...);
    return;
  }
  TORCH_CHECK(device.is_privateuseone(), name, ": expected ", kDeviceName,
              " or CPU tensors, got ", device);
  const c10::DeviceGuard guard(device);
  launchKernel(name, [body = std::move(body),
                      views = std::make_tuple(hostView(tensors)...)]() {
    std::apply(body, views);
  });
}

}  // namespace mydev::custom_ops
