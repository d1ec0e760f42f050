// Byte copies and fills as a device's copy engine does them: large ranges are
// split across a small persistent pool of helper threads, so that one copy
// reaches the bandwidth of a multi-threaded host copy.
#pragma once

#include <cstddef>

namespace mydev_sim {

void copy_bytes(void* dst, const void* src, size_t count);
void fill_bytes(void* dst, int value, size_t count);

}  // namespace mydev_sim
