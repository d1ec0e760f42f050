// What the caching allocator reports: cuda-shaped statistics (per pool
// kind: aggregate, small, large) and snapshots of every segment with its
// blocks, as torch.mydev.memory_stats / memory_snapshot show them.
#include <set>

#include "caching_allocator_device_cache.h"
#include "memory_history.h"

namespace mydev::caching_allocator {

using c10::CachingAllocator::Stat;
using c10::CachingAllocator::StatType;

void increase(c10::CachingAllocator::StatArray& array, const StatTypes& types,
              size_t amount) {
  c10::CachingAllocator::for_each_selected_stat_type(
      types, [&](size_t type) { array[type].increase(amount); });
}

void decrease(c10::CachingAllocator::StatArray& array, const StatTypes& types,
              size_t amount) {
  c10::CachingAllocator::for_each_selected_stat_type(
      types, [&](size_t type) { array[type].decrease(amount); });
}

// The two answers are constants: built per call, the array's three bools
// were stored one by one and read back as one word, a store-forwarding stall
// at every one of the several calls per allocation and free (4% of the
// host thread's perf samples in a loop of one-element adds).
namespace {

// The statistics a block of one pool kind counts in: the aggregate, and
// its pool's.
constexpr StatTypes statTypesOfPool(StatType pool) {
  StatTypes types{};
  types[static_cast<size_t>(StatType::AGGREGATE)] = true;
  types[static_cast<size_t>(pool)] = true;
  return types;
}

}  // namespace

const StatTypes& DeviceCache::statTypesFor(const BlockPool* pool) const {
  static constexpr StatTypes kSmallPool = statTypesOfPool(StatType::SMALL_POOL);
  static constexpr StatTypes kLargePool = statTypesOfPool(StatType::LARGE_POOL);
  return pool->is_small ? kSmallPool : kLargePool;
}

// A free block that is a piece of a split segment can't be returned to the
// driver until its neighbours are free too: CUDA reports these as
// "inactive_split".
void DeviceCache::noteInactiveSplit(const Block* block, int direction) {
  // An expandable segment's free blocks hold only the pages they map, which
  // releasing the cache unmaps: nothing is pinned.
  if (!block->isSplit() || block->expandable != nullptr) {
    return;
  }
  const StatTypes& types = statTypesFor(block->pool);
  if (direction > 0) {
    increase(stats_.inactive_split, types, 1);
    increase(stats_.inactive_split_bytes, types, block->size);
  } else {
    decrease(stats_.inactive_split, types, 1);
    decrease(stats_.inactive_split_bytes, types, block->size);
  }
}

DeviceStats DeviceCache::stats() {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  return stats_;
}

// Free blocks are in the pools (the device's and the private ones),
// allocated and free-pending ones in active_blocks_; walking each to its
// segment's head finds every segment.
std::vector<SegmentInfo> DeviceCache::snapshot() {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  std::set<Block*, bool (*)(const Block*, const Block*)> heads(
      [](const Block* a, const Block* b) { return a->ptr < b->ptr; });
  auto addSegmentOf = [&](Block* block) {
    while (block->prev != nullptr) block = block->prev;
    heads.insert(block);
  };
  for (Block* block : small_blocks_.blocks) addSegmentOf(block);
  for (Block* block : large_blocks_.blocks) addSegmentOf(block);
  for (const auto& [id, pool] : private_pools_) {
    for (Block* block : pool->small_blocks.blocks) addSegmentOf(block);
    for (Block* block : pool->large_blocks.blocks) addSegmentOf(block);
  }
  active_blocks_.forEach(addSegmentOf);
  std::vector<SegmentInfo> segments;
  for (Block* head : heads) {
    SegmentInfo& segment = segments.emplace_back();
    segment.device = device_;
    segment.address = address(head);
    segment.stream = head->stream;
    segment.is_large = !head->pool->is_small;
    segment.owner_private_pool_id = head->pool->owner;
    segment.is_expandable = head->expandable != nullptr;
    for (const Block* block = head; block != nullptr; block = block->next) {
      auto& info = segment.blocks.emplace_back();
      info.size = block->size;
      info.allocated = block->allocated;
      info.active = block->allocated || block->pending_events > 0;
      info.requested_size = info.active ? block->requested_size : 0;
      if (info.active) {
        info.context_when_allocated =
            memory_history::allocationContext(address(block));
      }
      segment.total_size += block->size;
      segment.requested_size += info.requested_size;
      segment.allocated_size += info.allocated ? block->size : 0;
      segment.active_size += info.active ? block->size : 0;
    }
  }
  return segments;
}

void DeviceCache::resetAccumulated() {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  for (auto* array : statArrays()) {
    for (Stat& stat : *array) {
      stat.reset_accumulated();
    }
  }
  stats_.num_alloc_retries = 0;
  stats_.num_ooms = 0;
  stats_.num_sync_all_streams = 0;
  stats_.num_device_alloc = 0;
  stats_.num_device_free = 0;
}

void DeviceCache::resetPeak() {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  for (auto* array : statArrays()) {
    for (Stat& stat : *array) {
      stat.reset_peak();
    }
  }
}

std::array<c10::CachingAllocator::StatArray*, 9> DeviceCache::statArrays() {
  return {&stats_.allocation,      &stats_.segment,
          &stats_.active,          &stats_.inactive_split,
          &stats_.allocated_bytes, &stats_.reserved_bytes,
          &stats_.active_bytes,    &stats_.inactive_split_bytes,
          &stats_.requested_bytes};
}

}  // namespace mydev::caching_allocator
