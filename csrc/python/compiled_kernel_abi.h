// Exports the launch table for torch.compile's kernel modules.
#pragma once

#include <Python.h>

#include <mydev_compiled_kernel.h>

namespace mydev {

// A new reference to the capsule device_ext._C publishes as
// _compiled_kernel_abi.
PyObject* compiledKernelAbiCapsule();

}  // namespace mydev
