// Pinned host memory (mydevHostAlloc): page-aligned, locked when the limits
// allow, and registered so that pointers into it are recognised.
#pragma once

#include <cstddef>

namespace mydev_sim {

// The pinned allocation containing `ptr`, if any. O(log n).
bool find_host_allocation(const void* ptr, char** base, size_t* size);

}  // namespace mydev_sim
