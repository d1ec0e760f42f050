// device_ext/include/mydev_extension.h: the library's API for third-party
// kernels, over the same launch path and host views as the ATen kernels.
#include <mydev_extension.h>

#include "../core/device.h"
#include "host_view.h"
#include "kernel_launch.h"

namespace mydev::ext {

c10::Stream currentStream(c10::DeviceIndex device) {
  return getCurrentStream(device).unwrap();
}

void launchKernel(const char* name, c10::Stream stream,
                  std::function<void()> kernel) {
  // MydevStream checks that it is a mydev stream.
  mydev::launchKernel(name, MydevStream(stream), std::move(kernel));
}

void* kernelPointer(const void* device_pointer) {
  return mydevKernelPointer(device_pointer);
}

at::Tensor kernelView(const at::Tensor& device_tensor) {
  TORCH_CHECK(device_tensor.device().type() == c10::DeviceType::PrivateUse1,
              "kernelView: expected a ", kDeviceName, " tensor, got one on ",
              device_tensor.device());
  return hostView(device_tensor);
}

}  // namespace mydev::ext
