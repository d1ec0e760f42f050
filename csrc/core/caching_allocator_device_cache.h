// One device's share of the caching allocator: its free lists, its segments,
// the frees that wait for other streams, and its statistics, all under one
// mutex (as CUDA's allocator does). The work is spread over files by concern:
//   caching_allocator_device_cache.cpp  allocate / free, split, merge,
//                                       segments from the driver, OOM
//   caching_allocator_stream_frees.cpp  record_stream and frees that wait
//                                       for other streams' events
//   caching_allocator_stats.cpp         statistics and memory snapshots
//   caching_allocator_expandable_segments.cpp
//                                       segments that map pages on demand
#pragma once

#include <c10/core/CachingDeviceAllocator.h>

#include <array>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "caching_allocator_blocks.h"
#include "mydev_event.h"

namespace mydev::caching_allocator {

using c10::CachingAllocator::StatTypes;
using c10::CachingDeviceAllocator::DeviceStats;
using c10::CachingDeviceAllocator::SegmentInfo;

class DeviceCache {
 public:
  explicit DeviceCache(c10::DeviceIndex device) : device_(device) {}

  Block* allocate(size_t requested);
  void free(Block* block);
  void recordStream(Block* block, c10::Stream stream);
  void emptyCache();

  // Graph private pools (caching_allocator_private_pools.cpp).
  void beginAllocateToPool(c10::MempoolId_t id, uint64_t capture_id);
  void endAllocateToPool(c10::MempoolId_t id);
  void releasePool(c10::MempoolId_t id);

  DeviceStats stats();
  // Every segment with its blocks in address order.
  std::vector<SegmentInfo> snapshot();
  void resetAccumulated();
  void resetPeak();

 private:
  // The free list a request of `size` bytes is served from (and its new
  // segments are filed under). The one place a new kind of pool plugs in.
  BlockPool& poolFor(size_t size, mydevStream_t stream);
  const StatTypes& statTypesFor(const BlockPool* pool) const;

  // A block of `size` bytes, split off and backed by device pages, from the
  // cache or a new segment; nullptr when the device has not enough memory.
  Block* findBlock(BlockPool& pool, mydevStream_t stream, size_t size);
  Block* takeFreeBlock(BlockPool& pool, mydevStream_t stream, size_t size);
  Block* allocateSegment(BlockPool& pool, mydevStream_t stream, size_t size);
  Block* splitIfWorthIt(Block* block, size_t size);
  void returnToPool(Block* block);
  // Every Block comes from newBlock and goes back through deleteBlock,
  // which keeps it for the next one (why: NodeRecycler).
  Block* newBlock(mydevStream_t stream, size_t size, BlockPool* pool,
                  void* ptr);
  void deleteBlock(Block* block);
  // Files a free block under its pool, merged with free neighbours.
  void insertFree(Block* block);
  void mergeWith(Block* block, Block* neighbour);
  void releaseCachedSegments();
  [[noreturn]] void throwOutOfMemory(size_t requested);

  // Expandable segments (caching_allocator_expandable_segments.cpp).
  // A new reservation as one free block, or nullptr when expandable
  // segments are off, `size_needed` exceeds the device or no reservation
  // fits.
  Block* reserveExpandableSegment(BlockPool& pool, mydevStream_t stream,
                                  size_t size_needed);
  // Maps the pages under `block` that are not mapped yet; false when the
  // device has not enough free memory. True for blocks of plain segments.
  bool mapPagesUnder(Block* block);
  // Unmaps the pages wholly inside the free `block`.
  void unmapPagesInside(Block* block);
  // Unmaps a free block's pages, and frees the reservation if the block is
  // all of it.
  void releaseExpandable(Block* block);

  // A graph's pool: its own free lists, so that the addresses its captured
  // kernels use are never handed to anything else while it lives.
  struct PrivatePool {
    explicit PrivatePool(c10::MempoolId_t id)
        : small_blocks(true, id), large_blocks(false, id) {}
    BlockPool small_blocks;
    BlockPool large_blocks;
    int retained = 0;  // graphs holding it
  };
  // The pool of the capture `stream` records into, or nullptr.
  PrivatePool* capturingPool(mydevStream_t stream);
  // Gives the whole free segments of unretained pools back to the driver
  // and forgets the pools that are empty (device synchronized by caller).
  void releaseUnretainedPools();
  void releaseSegment(BlockPool& pool, Block* block);

  // Cross-stream frees (caching_allocator_stream_frees.cpp).
  // True when the block must wait for events on the streams that used it.
  bool deferFreeForStreamUses(Block* block);
  void processPendingEvents();
  void waitForPendingEvents();

  // Statistics (caching_allocator_stats.cpp).
  void noteInactiveSplit(const Block* block, int direction);
  std::array<c10::CachingAllocator::StatArray*, 9> statArrays();

  const c10::DeviceIndex device_;
  // Recursive: the driver calls made under the lock may re-enter through
  // error paths that query statistics.
  std::recursive_mutex mutex_;
  BlockPool small_blocks_{true, {0, 0}};
  BlockPool large_blocks_{false, {0, 0}};
  std::deque<std::pair<MydevEvent, Block*>> pending_events_;
  std::vector<std::unique_ptr<Block>> spare_blocks_;
  ActiveBlocks active_blocks_;
  DeviceStats stats_;
  std::vector<std::unique_ptr<ExpandableSegment>> expandable_segments_;
  std::map<c10::MempoolId_t, std::unique_ptr<PrivatePool>> private_pools_;
  // Captures whose allocations go to a pool: capture id -> pool id.
  std::map<uint64_t, c10::MempoolId_t> capture_pools_;
};

// Adds to / subtracts from the selected entries of a statistic.
void increase(c10::CachingAllocator::StatArray& array, const StatTypes& types,
              size_t amount);
void decrease(c10::CachingAllocator::StatArray& array, const StatTypes& types,
              size_t amount);

}  // namespace mydev::caching_allocator
