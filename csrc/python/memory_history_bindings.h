// Bindings of torch.mydev.memory's _record_memory_history and _snapshot.
#pragma once

#include <torch/csrc/utils/pybind.h>

namespace mydev {

void bindMemoryHistory(pybind11::module& module);

}  // namespace mydev
