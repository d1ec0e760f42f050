// Pinned (page-locked) host memory for mydev: what pin_memory() returns and
// what makes non_blocking copies overlap with the host.
#pragma once

#include <ATen/core/CachingHostAllocator.h>

namespace mydev {

at::HostAllocator& hostAllocator();
bool isPinnedPointer(const void* ptr);

}  // namespace mydev
