// Rounding of sizes and offsets, shared by the allocators.
#pragma once

#include <unistd.h>

#include <cstddef>

namespace mydev_sim {

inline size_t round_up(size_t value, size_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

inline size_t round_down(size_t value, size_t multiple) {
  return value / multiple * multiple;
}

inline size_t page_size() {
  static const size_t size = size_t(sysconf(_SC_PAGE_SIZE));
  return size;
}

}  // namespace mydev_sim
