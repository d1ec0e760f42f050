// The mydev device allocator: a stream-aware caching allocator over the
// driver's arena, in the manner of CUDA's (block pools per stream, splitting,
// coalescing, record_stream, statistics, empty_cache, OOM with a retry after
// releasing the cache).
#pragma once

#include <c10/core/CachingDeviceAllocator.h>

#include <vector>

namespace mydev {

// The allocator registered for PrivateUse1 (what torch.accelerator's memory
// API and tensor allocation reach).
c10::DeviceAllocator& cachingAllocator();

// Every segment of every device with its blocks (torch.mydev.memory's
// snapshots), blocks carrying the stack that allocated them when memory
// history records stacks.
std::vector<c10::CachingDeviceAllocator::SegmentInfo> memorySnapshot();

// Graph private pools (caching_allocator_private_pools.cpp), as CUDA's
// allocator has them: between begin and end, allocations on `device` made
// from a stream recording into capture `capture_id` come from pool `pool`
// (created on first use; each begin retains it, like a graph sharing it).
// releasePool drops one retention; a pool nobody retains gives its memory
// back once its blocks are free (output tensors of a graph can outlive it).
void beginAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t pool,
                         uint64_t capture_id);
void endAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t pool);
void releasePool(c10::DeviceIndex device, c10::MempoolId_t pool);

}  // namespace mydev
