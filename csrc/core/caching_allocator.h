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

}  // namespace mydev
