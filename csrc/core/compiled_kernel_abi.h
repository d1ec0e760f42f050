// The launch table of device_ext/include/mydev_compiled_kernel.h as the
// library provides it: everything but tensor_argument, which needs Python
// objects (device_ext._C publishes a copy with it filled in).
#pragma once

#include <mydev_compiled_kernel.h>

namespace mydev {

const MydevCompiledKernelAbi& compiledKernelAbi();

// Sets the message the table's last_error() returns on the calling thread.
void setCompiledKernelError(const char* message);

}  // namespace mydev
