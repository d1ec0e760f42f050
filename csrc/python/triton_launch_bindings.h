// Bindings the Triton backend plugin (device_ext/triton_backend) launches
// through.
#pragma once

#include <torch/csrc/utils/pybind.h>

namespace mydev {

void bindTritonLaunch(pybind11::module& module);

}  // namespace mydev
