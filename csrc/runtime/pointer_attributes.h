// What a pointer points into: a device's memory, pinned host memory, or
// ordinary host memory.
#pragma once

#include <cstddef>

#include "mydev_runtime.h"

namespace mydev_sim {

struct PointerInfo {
  mydevMemoryType type = mydevMemoryTypeUnregistered;
  int device = -1;
  // The live allocation (or reservation) containing the pointer; nullptr for
  // ordinary host memory and for device addresses outside any.
  char* base = nullptr;
  size_t size = 0;
};

PointerInfo describe_pointer(const void* ptr);

}  // namespace mydev_sim
