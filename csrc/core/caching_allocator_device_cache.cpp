// Allocation and release on one device: best fit from the stream's free
// list, splitting, merging freed neighbours, segments from the driver, and
// the out-of-memory path with one retry after releasing the cache.
#include "caching_allocator_device_cache.h"

#include <c10/core/Allocator.h>

#include <limits>

#include "device.h"
#include "memory_history.h"
#include "mydev_stream.h"
#include "runtime_check.h"

namespace mydev::caching_allocator {

using c10::CachingDeviceAllocator::TraceEntry;

BlockPool& DeviceCache::poolFor(size_t size, mydevStream_t stream) {
  if (PrivatePool* pool = capturingPool(stream)) {
    return size <= kSmallSize ? pool->small_blocks : pool->large_blocks;
  }
  return size <= kSmallSize ? small_blocks_ : large_blocks_;
}

Block* DeviceCache::allocate(size_t requested) {
  // Beyond this the size arithmetic below would wrap around; no device is
  // that large anyway, so it is an out-of-memory condition.
  if (requested > (std::numeric_limits<size_t>::max() >> 2)) {
    throwOutOfMemory(requested);
  }
  const memory_history::CallContext context(TraceEntry::ALLOC);
  std::unique_lock<std::recursive_mutex> lock(mutex_);
  // Querying events is refused during a capture (the driver's unsafe
  // calls); CUDA's allocator defers them the same way.
  if (capture_pools_.empty()) {
    processPendingEvents();
  }
  const size_t size = roundSize(requested);
  const mydevStream_t stream = getCurrentStream(device_).raw();
  BlockPool& pool = poolFor(size, stream);

  Block* block = findBlock(pool, stream, size);
  if (block == nullptr) {
    // Like CUDA: release what is cached and try once more before OOM.
    releaseCachedSegments();
    stats_.num_alloc_retries += 1;
    block = findBlock(pool, stream, size);
  }
  if (block == nullptr) {
    lock.unlock();
    throwOutOfMemory(requested);
  }
  block->allocated = true;
  block->requested_size = requested;
  active_blocks_.insert(block);
  memory_history::record(TraceEntry::ALLOC, device_, address(block),
                         block->size, block->stream);

  const StatTypes& types = statTypesFor(block->pool);
  increase(stats_.allocation, types, 1);
  increase(stats_.allocated_bytes, types, block->size);
  increase(stats_.active, types, 1);
  increase(stats_.active_bytes, types, block->size);
  increase(stats_.requested_bytes, types, requested);
  c10::reportMemoryUsageToProfiler(
      block->ptr, static_cast<int64_t>(block->size),
      stats_.allocated_bytes[0].current, stats_.reserved_bytes[0].current,
      c10::Device(c10::DeviceType::PrivateUse1, device_));
  return block;
}

void DeviceCache::free(Block* block) {
  const memory_history::CallContext context(TraceEntry::FREE_REQUESTED);
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  TORCH_INTERNAL_ASSERT(block->allocated, kDeviceName,
                        " allocator: double free");
  block->allocated = false;
  memory_history::record(TraceEntry::FREE_REQUESTED, device_, address(block),
                         block->size, block->stream);

  const StatTypes& types = statTypesFor(block->pool);
  decrease(stats_.allocation, types, 1);
  decrease(stats_.allocated_bytes, types, block->size);
  decrease(stats_.requested_bytes, types, block->requested_size);
  c10::reportMemoryUsageToProfiler(
      block->ptr, -static_cast<int64_t>(block->size),
      stats_.allocated_bytes[0].current, stats_.reserved_bytes[0].current,
      c10::Device(c10::DeviceType::PrivateUse1, device_));

  if (deferFreeForStreamUses(block)) {
    return;
  }
  memory_history::record(TraceEntry::FREE_COMPLETED, device_, address(block),
                         block->size, block->stream);
  returnToPool(block);
}

void DeviceCache::emptyCache() {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  releaseCachedSegments();
}

Block* DeviceCache::findBlock(BlockPool& pool, mydevStream_t stream,
                              size_t size) {
  Block* block = takeFreeBlock(pool, stream, size);
  if (block == nullptr) {
    block = allocateSegment(pool, stream, size);
  }
  if (block == nullptr) {
    return nullptr;
  }
  block = splitIfWorthIt(block, size);
  if (!mapPagesUnder(block)) {
    insertFree(block);
    return nullptr;
  }
  return block;
}

Block* DeviceCache::takeFreeBlock(BlockPool& pool, mydevStream_t stream,
                                  size_t size) {
  Block key(device_, stream, size, &pool, nullptr);
  auto it = pool.blocks.lower_bound(&key);
  if (it == pool.blocks.end() || (*it)->stream != stream) {
    return nullptr;
  }
  Block* block = *it;
  // A huge cached block for a small request would pin a whole segment
  // (an expandable one pins only the pages it maps).
  if (&pool == &large_blocks_ && block->expandable == nullptr &&
      block->size >= kMinLargeAlloc && block->size > 2 * size + kLargeSegment) {
    return nullptr;
  }
  pool.blocks.erase(it);
  noteInactiveSplit(block, -1);
  return block;
}

Block* DeviceCache::allocateSegment(BlockPool& pool, mydevStream_t stream,
                                    size_t size) {
  if (Block* reservation = reserveExpandableSegment(pool, stream, size)) {
    return reservation;
  }
  const size_t segment_size = segmentSizeFor(size);
  void* ptr = nullptr;
  const mydevError_t status = mydevMalloc(&ptr, segment_size, device_);
  if (status == mydevErrorMemoryAllocation) {
    return nullptr;
  }
  MYDEV_CHECK(status);
  stats_.num_device_alloc += 1;
  memory_history::record(TraceEntry::SEGMENT_ALLOC, device_,
                         reinterpret_cast<size_t>(ptr), segment_size, stream);
  const StatTypes& types = statTypesFor(&pool);
  increase(stats_.segment, types, 1);
  increase(stats_.reserved_bytes, types, segment_size);
  return newBlock(stream, segment_size, &pool, ptr);
}

Block* DeviceCache::splitIfWorthIt(Block* block, size_t size) {
  const size_t remaining = block->size - size;
  const bool worth = block->pool->is_small ? remaining >= kMinBlockSize
                                           : remaining > kSmallSize;
  if (!worth) {
    return block;
  }
  Block* rest = newBlock(block->stream, remaining, block->pool,
                         static_cast<char*>(block->ptr) + size);
  rest->expandable = block->expandable;
  rest->prev = block;
  rest->next = block->next;
  if (rest->next != nullptr) {
    rest->next->prev = rest;
  }
  block->next = rest;
  block->size = size;
  block->pool->blocks.insert(rest);
  noteInactiveSplit(rest, +1);
  return block;
}

void DeviceCache::returnToPool(Block* block) {
  active_blocks_.erase(block);
  const StatTypes& types = statTypesFor(block->pool);
  decrease(stats_.active, types, 1);
  decrease(stats_.active_bytes, types, block->size);
  insertFree(block);
}

Block* DeviceCache::newBlock(mydevStream_t stream, size_t size, BlockPool* pool,
                             void* ptr) {
  if (spare_blocks_.empty()) {
    return new Block(device_, stream, size, pool, ptr);
  }
  std::unique_ptr<Block> block = std::move(spare_blocks_.back());
  spare_blocks_.pop_back();
  *block = Block(device_, stream, size, pool, ptr);
  return block.release();
}

void DeviceCache::deleteBlock(Block* block) {
  spare_blocks_.emplace_back(block);
}

void DeviceCache::insertFree(Block* block) {
  mergeWith(block, block->prev);
  mergeWith(block, block->next);
  block->pool->blocks.insert(block);
  noteInactiveSplit(block, +1);
}

// Absorbs a free neighbour into `block`.
void DeviceCache::mergeWith(Block* block, Block* neighbour) {
  if (neighbour == nullptr || neighbour->allocated ||
      neighbour->pending_events > 0) {
    return;
  }
  block->pool->blocks.erase(neighbour);
  noteInactiveSplit(neighbour, -1);
  if (neighbour == block->prev) {
    block->ptr = neighbour->ptr;
    block->prev = neighbour->prev;
    if (block->prev != nullptr) {
      block->prev->next = block;
    }
  } else {
    block->next = neighbour->next;
    if (block->next != nullptr) {
      block->next->prev = block;
    }
  }
  block->size += neighbour->size;
  deleteBlock(neighbour);
}

// Gives whole free segments back to the driver. Queued kernels may still
// touch blocks that were freed on their stream, so the device is
// synchronized first (cudaFree does the same implicitly).
void DeviceCache::releaseCachedSegments() {
  MYDEV_CHECK(mydevDeviceSynchronize(device_));
  stats_.num_sync_all_streams += 1;
  waitForPendingEvents();
  releaseUnretainedPools();
  for (BlockPool* pool : {&small_blocks_, &large_blocks_}) {
    for (auto it = pool->blocks.begin(); it != pool->blocks.end();) {
      Block* block = *it;
      if (block->expandable != nullptr) {
        ++it;  // before releaseExpandable, which may erase the block
        releaseExpandable(block);
        continue;
      }
      if (block->isSplit()) {
        ++it;
        continue;
      }
      it = pool->blocks.erase(it);
      releaseSegment(*pool, block);
    }
  }
}

// A whole free segment, already out of its free list, back to the driver.
void DeviceCache::releaseSegment(BlockPool& pool, Block* block) {
  memory_history::record(TraceEntry::SEGMENT_FREE, device_, address(block),
                         block->size, block->stream);
  MYDEV_CHECK(mydevFree(block->ptr));
  stats_.num_device_free += 1;
  const StatTypes& types = statTypesFor(&pool);
  decrease(stats_.segment, types, 1);
  decrease(stats_.reserved_bytes, types, block->size);
  deleteBlock(block);
}

void DeviceCache::throwOutOfMemory(size_t requested) {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  MYDEV_CHECK(mydevMemGetInfo(device_, &free_bytes, &total_bytes));
  DeviceStats snapshot;
  {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    stats_.num_ooms += 1;
    snapshot = stats_;
  }
  const auto allocated =
      static_cast<size_t>(snapshot.allocated_bytes[0].current);
  const auto reserved = static_cast<size_t>(snapshot.reserved_bytes[0].current);
  memory_history::record(TraceEntry::OOM, device_, free_bytes, requested,
                         getCurrentStream(device_).raw());
  c10::reportOutOfMemoryToProfiler(
      static_cast<int64_t>(requested), allocated, reserved,
      c10::Device(c10::DeviceType::PrivateUse1, device_));
  using c10::CachingAllocator::format_size;
  TORCH_CHECK_WITH(
      OutOfMemoryError, false, kDeviceName,
      " out of memory. Tried to allocate ", format_size(requested), ". ",
      kDeviceName, ":", static_cast<int>(device_), " has a total capacity of ",
      format_size(total_bytes), " of which ", format_size(free_bytes),
      " is free. Of the allocated memory ", format_size(allocated),
      " is allocated by PyTorch, and ", format_size(reserved - allocated),
      " is reserved by PyTorch but unallocated. Free tensors, call torch.",
      kDeviceName, ".empty_cache(), or raise MYDEV_MEMORY_MB.");
}

}  // namespace mydev::caching_allocator
