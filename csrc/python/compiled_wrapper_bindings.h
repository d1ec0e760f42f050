// Bindings that the Python wrapper Inductor generates for mydev calls on
// every run of a compiled graph (inductor_backend/python_wrapper.py).
#pragma once

#include <torch/csrc/utils/pybind.h>

namespace mydev {

void bindCompiledWrapper(pybind11::module& module);

}  // namespace mydev
