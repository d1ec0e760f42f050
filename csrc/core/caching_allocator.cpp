#include "caching_allocator.h"

#include <c10/core/Allocator.h>
#include <c10/util/irange.h>

#include <algorithm>
#include <array>
#include <deque>
#include <iterator>
#include <limits>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_set>
#include <vector>

#include "device.h"
#include "memory_history.h"
#include "mydev_event.h"
#include "mydev_stream.h"
#include "runtime_check.h"

namespace mydev {
namespace {

using c10::CachingAllocator::Stat;
using c10::CachingAllocator::StatType;
using c10::CachingAllocator::StatTypes;
using c10::CachingDeviceAllocator::DeviceStats;
using c10::CachingDeviceAllocator::SegmentInfo;
using c10::CachingDeviceAllocator::TraceEntry;

// Size classes as on CUDA: small requests share 2 MiB segments, medium ones
// 20 MiB segments, big ones get their own segment rounded to 2 MiB.
constexpr size_t kMinBlockSize = 512;
constexpr size_t kSmallSize = 1 << 20;
constexpr size_t kSmallSegment = 2 << 20;
constexpr size_t kLargeSegment = 20 << 20;
constexpr size_t kMinLargeAlloc = 10 << 20;
constexpr size_t kRoundLarge = 2 << 20;

size_t roundSize(size_t size) {
  if (size < kMinBlockSize) {
    return kMinBlockSize;
  }
  return kMinBlockSize * ((size + kMinBlockSize - 1) / kMinBlockSize);
}

size_t segmentSizeFor(size_t size) {
  if (size <= kSmallSize) {
    return kSmallSegment;
  }
  if (size < kMinLargeAlloc) {
    return kLargeSegment;
  }
  return kRoundLarge * ((size + kRoundLarge - 1) / kRoundLarge);
}

struct Block;

size_t address(const Block* block);

struct BlockComparator {
  bool operator()(const Block* a, const Block* b) const;
};
using BlockPool = std::set<Block*, BlockComparator>;

struct Block {
  c10::DeviceIndex device;
  mydevStream_t stream;  // the stream it was allocated on
  size_t size;
  size_t requested_size = 0;
  void* ptr;
  BlockPool* pool;
  bool allocated = false;
  Block* prev = nullptr;  // neighbours inside the same segment
  Block* next = nullptr;
  // Streams other than `stream` that used the block (record_stream).
  std::vector<c10::Stream> stream_uses;
  int pending_events = 0;

  Block(c10::DeviceIndex device_, mydevStream_t stream_, size_t size_,
        BlockPool* pool_, void* ptr_)
      : device(device_), stream(stream_), size(size_), ptr(ptr_), pool(pool_) {}

  bool isSplit() const { return prev != nullptr || next != nullptr; }
};

size_t address(const Block* block) {
  return reinterpret_cast<size_t>(block->ptr);
}

bool BlockComparator::operator()(const Block* a, const Block* b) const {
  if (a->stream != b->stream) {
    return reinterpret_cast<uintptr_t>(a->stream) <
           reinterpret_cast<uintptr_t>(b->stream);
  }
  if (a->size != b->size) {
    return a->size < b->size;
  }
  return reinterpret_cast<uintptr_t>(a->ptr) <
         reinterpret_cast<uintptr_t>(b->ptr);
}

StatTypes statTypesFor(const BlockPool* pool, const BlockPool* small_pool) {
  StatTypes types{};
  types[static_cast<size_t>(StatType::AGGREGATE)] = true;
  types[static_cast<size_t>(pool == small_pool ? StatType::SMALL_POOL
                                               : StatType::LARGE_POOL)] = true;
  return types;
}

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

// All state of one device, under one mutex (as CUDA's allocator does).
class DeviceCache {
 public:
  explicit DeviceCache(c10::DeviceIndex device) : device_(device) {}

  Block* allocate(size_t requested) {
    // Beyond this the size arithmetic below would wrap around; no device is
    // that large anyway, so it is an out-of-memory condition.
    if (requested > (std::numeric_limits<size_t>::max() >> 2)) {
      throwOutOfMemory(requested);
    }
    const memory_history::CallContext context(TraceEntry::ALLOC);
    std::unique_lock<std::recursive_mutex> lock(mutex_);
    processPendingEvents();
    const size_t size = roundSize(requested);
    BlockPool& pool = size <= kSmallSize ? small_blocks_ : large_blocks_;
    const mydevStream_t stream = getCurrentStream(device_).raw();

    Block* block = takeFreeBlock(pool, stream, size);
    if (block == nullptr) {
      block = allocateSegment(pool, stream, size);
    }
    if (block == nullptr) {
      // Like CUDA: release what is cached and try once more before OOM.
      releaseCachedSegments();
      stats_.num_alloc_retries += 1;
      block = allocateSegment(pool, stream, size);
    }
    if (block == nullptr) {
      lock.unlock();
      throwOutOfMemory(requested);
    }
    block = splitIfWorthIt(block, size);
    block->allocated = true;
    block->requested_size = requested;
    active_blocks_.insert(block);
    memory_history::record(TraceEntry::ALLOC, device_, address(block),
                           block->size, block->stream);

    const StatTypes types = statTypesFor(block->pool, &small_blocks_);
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

  void free(Block* block) {
    const memory_history::CallContext context(TraceEntry::FREE_REQUESTED);
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    TORCH_INTERNAL_ASSERT(block->allocated, "mydev allocator: double free");
    block->allocated = false;
    memory_history::record(TraceEntry::FREE_REQUESTED, device_, address(block),
                           block->size, block->stream);

    const StatTypes types = statTypesFor(block->pool, &small_blocks_);
    decrease(stats_.allocation, types, 1);
    decrease(stats_.allocated_bytes, types, block->size);
    decrease(stats_.requested_bytes, types, block->requested_size);
    c10::reportMemoryUsageToProfiler(
        block->ptr, -static_cast<int64_t>(block->size),
        stats_.allocated_bytes[0].current, stats_.reserved_bytes[0].current,
        c10::Device(c10::DeviceType::PrivateUse1, device_));

    if (!block->stream_uses.empty()) {
      // Other streams may still read it: reuse waits for their work.
      for (const c10::Stream& use : block->stream_uses) {
        MydevEvent event;
        event.record(MydevStream(use));
        pending_events_.emplace_back(std::move(event), block);
        block->pending_events += 1;
      }
      block->stream_uses.clear();
      return;
    }
    memory_history::record(TraceEntry::FREE_COMPLETED, device_, address(block),
                           block->size, block->stream);
    returnToPool(block);
  }

  void recordStream(Block* block, c10::Stream stream) {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    if (MydevStream(stream).raw() == block->stream) {
      return;  // the owning stream orders its own reuse
    }
    if (std::find(block->stream_uses.begin(), block->stream_uses.end(),
                  stream) == block->stream_uses.end()) {
      block->stream_uses.push_back(stream);
    }
  }

  void emptyCache() {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    releaseCachedSegments();
  }

  DeviceStats stats() {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    return stats_;
  }

  // Every segment with its blocks in address order: free blocks are in the
  // pools, allocated and free-pending ones in active_blocks_.
  std::vector<SegmentInfo> snapshot() {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    std::set<Block*, bool (*)(const Block*, const Block*)> heads(
        [](const Block* a, const Block* b) { return a->ptr < b->ptr; });
    auto addSegmentOf = [&](Block* block) {
      while (block->prev != nullptr) block = block->prev;
      heads.insert(block);
    };
    for (Block* block : small_blocks_) addSegmentOf(block);
    for (Block* block : large_blocks_) addSegmentOf(block);
    for (Block* block : active_blocks_) addSegmentOf(block);
    std::vector<SegmentInfo> segments;
    for (Block* head : heads) {
      SegmentInfo& segment = segments.emplace_back();
      segment.device = device_;
      segment.address = address(head);
      segment.stream = head->stream;
      segment.is_large = head->pool == &large_blocks_;
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

  void resetAccumulated() {
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

  void resetPeak() {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    for (auto* array : statArrays()) {
      for (Stat& stat : *array) {
        stat.reset_peak();
      }
    }
  }

 private:
  std::array<c10::CachingAllocator::StatArray*, 9> statArrays() {
    return {&stats_.allocation,      &stats_.segment,
            &stats_.active,          &stats_.inactive_split,
            &stats_.allocated_bytes, &stats_.reserved_bytes,
            &stats_.active_bytes,    &stats_.inactive_split_bytes,
            &stats_.requested_bytes};
  }

  Block* takeFreeBlock(BlockPool& pool, mydevStream_t stream, size_t size) {
    Block key(device_, stream, size, &pool, nullptr);
    auto it = pool.lower_bound(&key);
    if (it == pool.end() || (*it)->stream != stream) {
      return nullptr;
    }
    Block* block = *it;
    // A huge cached block for a small request would pin a whole segment.
    if (&pool == &large_blocks_ && block->size >= kMinLargeAlloc &&
        block->size > 2 * size + kLargeSegment) {
      return nullptr;
    }
    pool.erase(it);
    noteInactiveSplit(block, -1);
    return block;
  }

  // A free block that is a piece of a split segment can't be returned to the
  // driver until its neighbours are free too: CUDA reports these as
  // "inactive_split".
  void noteInactiveSplit(const Block* block, int direction) {
    if (!block->isSplit()) {
      return;
    }
    const StatTypes types = statTypesFor(block->pool, &small_blocks_);
    if (direction > 0) {
      increase(stats_.inactive_split, types, 1);
      increase(stats_.inactive_split_bytes, types, block->size);
    } else {
      decrease(stats_.inactive_split, types, 1);
      decrease(stats_.inactive_split_bytes, types, block->size);
    }
  }

  Block* allocateSegment(BlockPool& pool, mydevStream_t stream, size_t size) {
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
    const StatTypes types = statTypesFor(&pool, &small_blocks_);
    increase(stats_.segment, types, 1);
    increase(stats_.reserved_bytes, types, segment_size);
    return new Block(device_, stream, segment_size, &pool, ptr);
  }

  Block* splitIfWorthIt(Block* block, size_t size) {
    const size_t remaining = block->size - size;
    const bool worth = block->pool == &small_blocks_
                           ? remaining >= kMinBlockSize
                           : remaining > kSmallSize;
    if (!worth) {
      return block;
    }
    auto* rest = new Block(device_, block->stream, remaining, block->pool,
                           static_cast<char*>(block->ptr) + size);
    rest->prev = block;
    rest->next = block->next;
    if (rest->next != nullptr) {
      rest->next->prev = rest;
    }
    block->next = rest;
    block->size = size;
    block->pool->insert(rest);
    noteInactiveSplit(rest, +1);
    return block;
  }

  void returnToPool(Block* block) {
    active_blocks_.erase(block);
    const StatTypes types = statTypesFor(block->pool, &small_blocks_);
    decrease(stats_.active, types, 1);
    decrease(stats_.active_bytes, types, block->size);
    mergeWith(block, block->prev);
    mergeWith(block, block->next);
    block->pool->insert(block);
    noteInactiveSplit(block, +1);
  }

  // Absorbs a free neighbour into `block`.
  void mergeWith(Block* block, Block* neighbour) {
    if (neighbour == nullptr || neighbour->allocated ||
        neighbour->pending_events > 0) {
      return;
    }
    block->pool->erase(neighbour);
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
    delete neighbour;
  }

  void processPendingEvents() {
    while (!pending_events_.empty()) {
      if (!pending_events_.front().first.query()) {
        break;
      }
      Block* ready = pending_events_.front().second;
      pending_events_.pop_front();
      if (--ready->pending_events == 0) {
        memory_history::record(TraceEntry::FREE_COMPLETED, device_,
                               address(ready), ready->size, ready->stream);
        returnToPool(ready);
      }
    }
  }

  void waitForPendingEvents() {
    for (const auto& pending : pending_events_) {
      pending.first.synchronize();
    }
    processPendingEvents();
  }

  // Gives whole free segments back to the driver. Queued kernels may still
  // touch blocks that were freed on their stream, so the device is
  // synchronized first (cudaFree does the same implicitly).
  void releaseCachedSegments() {
    MYDEV_CHECK(mydevDeviceSynchronize(device_));
    stats_.num_sync_all_streams += 1;
    waitForPendingEvents();
    for (BlockPool* pool : {&small_blocks_, &large_blocks_}) {
      for (auto it = pool->begin(); it != pool->end();) {
        Block* block = *it;
        if (block->isSplit()) {
          ++it;
          continue;
        }
        memory_history::record(TraceEntry::SEGMENT_FREE, device_,
                               address(block), block->size, block->stream);
        MYDEV_CHECK(mydevFree(block->ptr));
        stats_.num_device_free += 1;
        const StatTypes types = statTypesFor(pool, &small_blocks_);
        decrease(stats_.segment, types, 1);
        decrease(stats_.reserved_bytes, types, block->size);
        it = pool->erase(it);
        delete block;
      }
    }
  }

  [[noreturn]] void throwOutOfMemory(size_t requested) {
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
    const auto reserved =
        static_cast<size_t>(snapshot.reserved_bytes[0].current);
    memory_history::record(TraceEntry::OOM, device_, free_bytes, requested,
                           getCurrentStream(device_).raw());
    c10::reportOutOfMemoryToProfiler(
        static_cast<int64_t>(requested), allocated, reserved,
        c10::Device(c10::DeviceType::PrivateUse1, device_));
    using c10::CachingAllocator::format_size;
    TORCH_CHECK_WITH(
        OutOfMemoryError, false, "mydev out of memory. Tried to allocate ",
        format_size(requested), ". mydev:", static_cast<int>(device_),
        " has a total capacity of ", format_size(total_bytes), " of which ",
        format_size(free_bytes), " is free. Of the allocated memory ",
        format_size(allocated), " is allocated by PyTorch, and ",
        format_size(reserved - allocated),
        " is reserved by PyTorch but unallocated. Free tensors, call "
        "torch.mydev.empty_cache(), or raise MYDEV_MEMORY_MB.");
  }

  const c10::DeviceIndex device_;
  // Recursive: the driver calls made under the lock may re-enter through
  // error paths that query statistics.
  std::recursive_mutex mutex_;
  BlockPool small_blocks_;
  BlockPool large_blocks_;
  std::deque<std::pair<MydevEvent, Block*>> pending_events_;
  // Allocated blocks and freed ones still waiting for other streams.
  std::unordered_set<Block*> active_blocks_;
  DeviceStats stats_;
};

// DataPtr context of every allocation is its Block, so freeing needs no
// lookup.
void freeBlock(void* context);

class CachingAllocatorImpl final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t size) override {
    const c10::DeviceIndex device = currentDevice();
    const c10::Device where(c10::DeviceType::PrivateUse1, device);
    if (size == 0) {
      return {nullptr, nullptr, &freeBlock, where};
    }
    Block* block = cacheFor(device).allocate(size);
    return {block->ptr, block, &freeBlock, where};
  }

  // No raw deleter: the context (the Block) differs from the data pointer,
  // so raw_allocate/raw_delete can't be offered.

  // Storage-level copies (e.g. Storage.clone) between device buffers.
  void copy_data(void* dest, const void* src,
                 std::size_t count) const override {
    MYDEV_CHECK(mydevMemcpyAsync(dest, src, count, mydevMemcpyDeviceToDevice,
                                 getCurrentStream().raw()));
  }

  bool initialized() override { return true; }

  void emptyCache(c10::MempoolId_t) override {
    for (const c10::DeviceIndex device : c10::irange(deviceCount())) {
      if (created(device)) {
        cacheFor(device).emptyCache();
      }
    }
  }

  void recordStream(const c10::DataPtr& data_ptr, c10::Stream stream) override {
    if (data_ptr.get_deleter() != &freeBlock ||
        data_ptr.get_context() == nullptr) {
      return;  // not ours (e.g. memory borrowed through from_blob)
    }
    auto* block = static_cast<Block*>(data_ptr.get_context());
    cacheFor(block->device).recordStream(block, stream);
  }

  DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    return cacheFor(checked(device)).stats();
  }

  void resetAccumulatedStats(c10::DeviceIndex device) override {
    cacheFor(checked(device)).resetAccumulated();
  }

  void resetPeakStats(c10::DeviceIndex device) override {
    cacheFor(checked(device)).resetPeak();
  }

  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    size_t free_bytes = 0;
    size_t total_bytes = 0;
    MYDEV_CHECK(mydevMemGetInfo(checked(device), &free_bytes, &total_bytes));
    return {free_bytes, total_bytes};
  }

  void release(Block* block) { cacheFor(block->device).free(block); }

  std::vector<SegmentInfo> snapshot() {
    std::vector<SegmentInfo> segments;
    for (const c10::DeviceIndex device : c10::irange(deviceCount())) {
      if (created(device)) {
        std::vector<SegmentInfo> of_device = cacheFor(device).snapshot();
        std::move(of_device.begin(), of_device.end(),
                  std::back_inserter(segments));
      }
    }
    return segments;
  }

 private:
  static c10::DeviceIndex checked(c10::DeviceIndex device) {
    if (device < 0) {
      return currentDevice();
    }
    checkDeviceIndex(device);
    return device;
  }

  bool created(c10::DeviceIndex device) {
    std::lock_guard<std::mutex> lock(caches_mutex_);
    return caches_[device] != nullptr;
  }

  DeviceCache& cacheFor(c10::DeviceIndex device) {
    std::lock_guard<std::mutex> lock(caches_mutex_);
    auto& cache = caches_[device];
    if (cache == nullptr) {
      cache = std::make_unique<DeviceCache>(device);
    }
    return *cache;
  }

  std::mutex caches_mutex_;
  std::array<std::unique_ptr<DeviceCache>, kMaxDevices> caches_;
};

CachingAllocatorImpl& instance() {
  // Leaked: tensors freed during interpreter shutdown still need it.
  static auto* allocator = new CachingAllocatorImpl();
  return *allocator;
}

void freeBlock(void* context) {
  if (context != nullptr) {
    instance().release(static_cast<Block*>(context));
  }
}

struct RegisterAllocator {
  RegisterAllocator() {
    c10::SetAllocator(c10::DeviceType::PrivateUse1, &instance());
  }
} register_allocator;

}  // namespace

c10::DeviceAllocator& cachingAllocator() { return instance(); }

std::vector<SegmentInfo> memorySnapshot() { return instance().snapshot(); }

}  // namespace mydev
