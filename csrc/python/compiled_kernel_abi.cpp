// The launch table's Python half: device_ext._C publishes the library's
// table (core/compiled_kernel_abi.h) as a capsule, with tensor_argument,
// which reads Python tensors, filled in.
#include "compiled_kernel_abi.h"

#include <torch/csrc/autograd/python_variable.h>

#include <cstdio>
#include <cstring>

#include "../core/compiled_kernel_abi.h"
#include "../core/runtime_check.h"

namespace mydev {
namespace {

template <typename... Args>
void setLastError(const char* format, Args... args) {
  char message[512];
  std::snprintf(message, sizeof(message), format, args...);
  setCompiledKernelError(message);
}

int tensorArgument(MydevPyObject* object, const char* kernel, int argument,
                   int device, void** device_pointer, void* host_value,
                   int capacity) {
  if (!THPVariable_Check(object)) {
    setLastError("%s: argument %d is a %s, expected a mydev tensor", kernel,
                 argument, Py_TYPE(object)->tp_name);
    return -1;
  }
  const at::Tensor& tensor = THPVariable_Unpack(object);
  if (tensor.device().type() == c10::DeviceType::PrivateUse1) {
    if (tensor.device().index() != device) {
      setLastError("%s: argument %d is on %s, but the kernel runs on mydev:%d",
                   kernel, argument, tensor.device().str().c_str(), device);
      return -1;
    }
    *device_pointer = mydevKernelPointer(tensor.data_ptr());
    return 0;
  }
  if (tensor.device().is_cpu() && tensor.numel() == 1 &&
      tensor.element_size() <= static_cast<size_t>(capacity)) {
    std::memcpy(host_value, tensor.data_ptr(), tensor.element_size());
    return 1;
  }
  setLastError(
      "%s: argument %d is on %s, expected a mydev tensor (or a one-element CPU "
      "tensor)",
      kernel, argument, tensor.device().str().c_str());
  return -1;
}

MydevCompiledKernelAbi withTensorArgument() {
  MydevCompiledKernelAbi table = compiledKernelAbi();
  table.tensor_argument = &tensorArgument;
  return table;
}

const MydevCompiledKernelAbi kAbi = withTensorArgument();

}  // namespace

PyObject* compiledKernelAbiCapsule() {
  return PyCapsule_New(const_cast<MydevCompiledKernelAbi*>(&kAbi),
                       MYDEV_COMPILED_KERNEL_ABI_CAPSULE, nullptr);
}

}  // namespace mydev
