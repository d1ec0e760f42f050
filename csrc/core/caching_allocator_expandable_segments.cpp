// Expandable segments (PYTORCH_ALLOC_CONF=expandable_segments:True, as on
// cuda): instead of one driver allocation per segment, a pool gets a
// reservation of device addresses as large as the device, cut into blocks as
// usual, with device pages mapped only under the blocks in use (or cached).
// Releasing the cache unmaps the pages wholly inside free blocks wherever
// they are, so memory held by a free piece of a segment that still has live
// blocks goes back to the device: fragmentation of the cache cannot cause an
// out-of-memory error. Pages are the driver's granularity (64 KiB); a page
// shared by two blocks stays mapped while either needs it.
#include <c10/core/AllocatorConfig.h>

#include "caching_allocator_device_cache.h"
#include "memory_history.h"
#include "runtime_check.h"

namespace mydev::caching_allocator {

using c10::CachingDeviceAllocator::TraceEntry;

namespace {

size_t granularity() {
  static const size_t value = [] {
    size_t bytes = 0;
    MYDEV_CHECK(mydevMemGetGranularity(&bytes));
    return bytes;
  }();
  return value;
}

}  // namespace

Block* DeviceCache::reserveExpandableSegment(BlockPool& pool,
                                             mydevStream_t stream,
                                             size_t size_needed) {
  if (!c10::CachingAllocator::AcceleratorAllocatorConfig::
          use_expandable_segments()) {
    return nullptr;
  }
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  MYDEV_CHECK(mydevMemGetInfo(device_, &free_bytes, &total_bytes));
  const size_t page = granularity();
  const size_t size = (total_bytes + page - 1) / page * page;
  if (size_needed > size) {
    return nullptr;  // larger than the device: the plain path reports OOM
  }
  void* base = nullptr;
  const mydevError_t status = mydevMemAddressReserve(&base, size, device_);
  if (status == mydevErrorMemoryAllocation) {
    return nullptr;  // no room for another reservation: plain segments
  }
  MYDEV_CHECK(status);
  auto segment = std::make_unique<ExpandableSegment>();
  segment->base = static_cast<char*>(base);
  segment->size = size;
  segment->mapped.assign(size / page, false);
  Block* block = newBlock(stream, size, &pool, base);
  block->expandable = segment.get();
  expandable_segments_.push_back(std::move(segment));
  increase(stats_.segment, statTypesFor(&pool), 1);
  return block;
}

bool DeviceCache::mapPagesUnder(Block* block) {
  ExpandableSegment* segment = block->expandable;
  if (segment == nullptr) {
    return true;
  }
  const size_t page = granularity();
  const size_t offset = static_cast<char*>(block->ptr) - segment->base;
  const size_t first = offset / page;
  const size_t end = (offset + block->size + page - 1) / page;
  for (size_t p = first; p < end;) {
    if (segment->mapped[p]) {
      ++p;
      continue;
    }
    size_t run_end = p;
    while (run_end < end && !segment->mapped[run_end]) ++run_end;
    char* start = segment->base + p * page;
    const size_t bytes = (run_end - p) * page;
    const mydevError_t status = mydevMemMap(start, bytes);
    if (status == mydevErrorMemoryAllocation) {
      return false;
    }
    MYDEV_CHECK(status);
    std::fill(segment->mapped.begin() + p, segment->mapped.begin() + run_end,
              true);
    stats_.num_device_alloc += 1;
    increase(stats_.reserved_bytes, statTypesFor(block->pool), bytes);
    memory_history::record(TraceEntry::SEGMENT_MAP, device_,
                           reinterpret_cast<size_t>(start), bytes,
                           block->stream);
    p = run_end;
  }
  return true;
}

void DeviceCache::unmapPagesInside(Block* block) {
  ExpandableSegment* segment = block->expandable;
  const size_t page = granularity();
  const size_t offset = static_cast<char*>(block->ptr) - segment->base;
  const size_t first = (offset + page - 1) / page;
  const size_t end = (offset + block->size) / page;
  for (size_t p = first; p < end;) {
    if (!segment->mapped[p]) {
      ++p;
      continue;
    }
    size_t run_end = p;
    while (run_end < end && segment->mapped[run_end]) ++run_end;
    char* start = segment->base + p * page;
    const size_t bytes = (run_end - p) * page;
    MYDEV_CHECK(mydevMemUnmap(start, bytes));
    std::fill(segment->mapped.begin() + p, segment->mapped.begin() + run_end,
              false);
    stats_.num_device_free += 1;
    decrease(stats_.reserved_bytes, statTypesFor(block->pool), bytes);
    memory_history::record(TraceEntry::SEGMENT_UNMAP, device_,
                           reinterpret_cast<size_t>(start), bytes,
                           block->stream);
    p = run_end;
  }
}

void DeviceCache::releaseExpandable(Block* block) {
  unmapPagesInside(block);
  if (block->isSplit()) {
    return;  // live blocks remain: the reservation stays
  }
  ExpandableSegment* segment = block->expandable;
  MYDEV_CHECK(mydevMemAddressFree(segment->base, segment->size));
  decrease(stats_.segment, statTypesFor(block->pool), 1);
  block->pool->blocks.erase(block);
  for (auto it = expandable_segments_.begin(); it != expandable_segments_.end();
       ++it) {
    if (it->get() == segment) {
      expandable_segments_.erase(it);
      break;
    }
  }
  deleteBlock(block);
}

}  // namespace mydev::caching_allocator
