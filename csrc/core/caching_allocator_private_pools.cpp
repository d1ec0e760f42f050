// Graph private pools. A graph's captured kernels keep using the addresses
// they were given during capture at every replay, so those blocks must never
// go to anyone else while the graph lives: allocations made by the capture
// come from the graph's own free lists (a PrivatePool), which graphs can
// share (graph_pool_handle). Frees inside the capture return blocks to that
// pool, where later allocations of the same capture reuse them, as the
// replay's stream order makes safe. When no graph retains a pool any more,
// its memory goes back to the driver once its blocks are free (emptyCache,
// or the retry before an out-of-memory error).

#include "caching_allocator_device_cache.h"
#include "device.h"
#include "runtime_check.h"

namespace mydev::caching_allocator {

void DeviceCache::beginAllocateToPool(c10::MempoolId_t id,
                                      uint64_t capture_id) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  auto& pool = private_pools_[id];
  if (pool == nullptr) {
    pool = std::make_unique<PrivatePool>(id);
  }
  pool->retained += 1;
  capture_pools_[capture_id] = id;
}

void DeviceCache::endAllocateToPool(c10::MempoolId_t id) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  for (auto it = capture_pools_.begin(); it != capture_pools_.end();) {
    it = it->second == id ? capture_pools_.erase(it) : std::next(it);
  }
}

void DeviceCache::releasePool(c10::MempoolId_t id) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  auto it = private_pools_.find(id);
  TORCH_INTERNAL_ASSERT(it != private_pools_.end() && it->second->retained > 0,
                        kDeviceName, " allocator: release of an unknown pool");
  it->second->retained -= 1;
}

DeviceCache::PrivatePool* DeviceCache::capturingPool(mydevStream_t stream) {
  if (capture_pools_.empty()) {
    return nullptr;
  }
  mydevStreamCaptureStatus status = mydevStreamCaptureStatusNone;
  uint64_t capture_id = 0;
  MYDEV_CHECK(mydevStreamGetCaptureInfo(stream, &status, &capture_id));
  const auto it = capture_pools_.find(capture_id);
  if (status == mydevStreamCaptureStatusNone || it == capture_pools_.end()) {
    return nullptr;
  }
  return private_pools_.at(it->second).get();
}

void DeviceCache::releaseUnretainedPools() {
  for (auto it = private_pools_.begin(); it != private_pools_.end();) {
    PrivatePool& pool = *it->second;
    if (pool.retained > 0) {
      ++it;
      continue;
    }
    for (BlockPool* blocks : {&pool.small_blocks, &pool.large_blocks}) {
      for (auto block_it = blocks->blocks.begin();
           block_it != blocks->blocks.end();) {
        Block* block = *block_it;
        if (block->expandable != nullptr) {
          ++block_it;  // before releaseExpandable, which may erase it
          releaseExpandable(block);
        } else if (block->isSplit()) {
          ++block_it;
        } else {
          block_it = blocks->blocks.erase(block_it);
          releaseSegment(*blocks, block);
        }
      }
    }
    const bool in_use = !pool.small_blocks.blocks.empty() ||
                        !pool.large_blocks.blocks.empty() ||
                        active_blocks_.any([&](const Block* block) {
                          return block->pool == &pool.small_blocks ||
                                 block->pool == &pool.large_blocks;
                        });
    it = in_use ? std::next(it) : private_pools_.erase(it);
  }
}

}  // namespace mydev::caching_allocator
