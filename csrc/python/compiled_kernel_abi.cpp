// The function table that torch.compile's mydev kernel modules launch
// through (see device_ext/include/mydev_compiled_kernel.h for the contract).
#include "compiled_kernel_abi.h"

#include <torch/csrc/autograd/python_variable.h>

#include <cstdio>
#include <exception>
#include <memory>

#include "../core/mydev_stream.h"
#include "../core/runtime_check.h"

namespace mydev {
namespace {

thread_local char last_error_message[512];

template <typename... Args>
void setLastError(const char* format, Args... args) {
  std::snprintf(last_error_message, sizeof(last_error_message), format, args...);
}

const char* lastError() { return last_error_message; }

void* tensorDataPtr(PyObject* object, const char* kernel, int argument) {
  if (!THPVariable_Check(object)) {
    setLastError("%s: argument %d is a %s, expected a mydev tensor", kernel,
                 argument, Py_TYPE(object)->tp_name);
    return nullptr;
  }
  const at::Tensor& tensor = THPVariable_Unpack(object);
  if (tensor.device().type() != c10::DeviceType::PrivateUse1) {
    setLastError("%s: argument %d is on %s, expected a mydev tensor", kernel,
                 argument, tensor.device().str().c_str());
    return nullptr;
  }
  return tensor.data_ptr();
}

void* currentStream(int device) {
  try {
    return getCurrentStream(static_cast<c10::DeviceIndex>(device)).raw();
  } catch (const std::exception& error) {
    setLastError("%s", error.what());
    return nullptr;
  }
}

int exchangeDevice(int device) {
  try {
    const c10::DeviceIndex index = static_cast<c10::DeviceIndex>(device);
    checkDeviceIndex(index);
    const c10::DeviceIndex previous = currentDevice();
    if (index != previous) {
      MYDEV_CHECK(mydevSetDevice(index));
    }
    return previous;
  } catch (const std::exception& error) {
    setLastError("%s", error.what());
    return -1;
  }
}

struct CompiledKernel {
  MydevKernelBody run;
  void* payload;
};

void runCompiledKernel(void* user_data) {
  const std::unique_ptr<CompiledKernel> kernel(static_cast<CompiledKernel*>(user_data));
  kernel->run(kernel->payload);
}

int launch(void* stream, const char* name, MydevKernelBody run,
           MydevKernelBody discard, void* payload) {
  auto kernel = std::make_unique<CompiledKernel>(CompiledKernel{run, payload});
  const mydevError_t status = mydevLaunchKernel(
      static_cast<mydevStream_t>(stream), name, &runCompiledKernel, kernel.get());
  if (status == mydevSuccess) {
    kernel.release();
    return 0;
  }
  if (status == mydevErrorLaunchFailure) {
    // Launch blocking: the kernel ran, failed, and freed what it owned.
    kernel.release();
  } else {
    discard(payload);
  }
  setLastError("%s", mydevGetLastErrorMessage());
  return 1;
}

const MydevCompiledKernelAbi kAbi{
    MYDEV_COMPILED_KERNEL_ABI_VERSION, &tensorDataPtr, &currentStream, &exchangeDevice,
    &launch,
    &lastError};

}  // namespace

PyObject* compiledKernelAbiCapsule() {
  return PyCapsule_New(const_cast<MydevCompiledKernelAbi*>(&kAbi),
                       MYDEV_COMPILED_KERNEL_ABI_CAPSULE, nullptr);
}

}  // namespace mydev
