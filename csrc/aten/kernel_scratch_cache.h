// Host memory that CPU kernels allocate for themselves while a device
// kernel runs them (oneDNN's blocked-layout buffers, im2col columns, ...),
// kept for the next call as a GPU library keeps its workspace.
//
// Why: a stream's executor is not the main thread, so glibc serves its
// large allocations from a per-thread arena that hands pages back to the
// kernel when they are freed; a 3x3 convolution on [8, 64, 56, 56] then
// page-faults ~2,400 times per call on its scratch, a third of its time. A
// real device's kernels would not pay that. Only allocations of at least
// kMinCachedBytes are kept, at most kMaxCachedBytes in all; a block is
// reused for an allocation of exactly its size.
#pragma once

#include <c10/core/Allocator.h>

#include <cstddef>

namespace mydev {

constexpr size_t kMinCachedBytes = size_t{1} << 20;
constexpr size_t kMaxCachedBytes = size_t{256} << 20;

// Memory for `nbytes` of kernel scratch: a free cached block of that size,
// or a new block from `allocator`; past the cap, `allocator`'s own
// allocation, not cached. The DataPtr's context is its data (raw_allocate
// needs that), and freeing it returns the block to the cache.
c10::DataPtr allocateKernelScratch(c10::Allocator& allocator, size_t nbytes);

// Returns `address` to the cache if it is a cached block in use (true);
// false for any other memory. Safe on any thread.
bool releaseKernelScratch(void* address);

struct KernelScratchStats {
  size_t cached_bytes = 0;  // blocks owned by the cache, in use or free
  size_t reuses = 0;        // allocations served by a free block
};
KernelScratchStats kernelScratchStats();

}  // namespace mydev
