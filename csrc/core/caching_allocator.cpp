// The allocator registered for PrivateUse1: one DeviceCache per device,
// created on first use, behind c10's DeviceAllocator interface.
#include "caching_allocator.h"

#include <c10/core/Allocator.h>
#include <c10/util/irange.h>

#include <array>
#include <atomic>
#include <iterator>
#include <mutex>
#include <vector>

#include "caching_allocator_device_cache.h"
#include "device.h"
#include "mydev_stream.h"
#include "runtime_check.h"

namespace mydev {
namespace {

using c10::CachingDeviceAllocator::DeviceStats;
using c10::CachingDeviceAllocator::SegmentInfo;
using caching_allocator::Block;
using caching_allocator::DeviceCache;

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

  // Graph private pools reach the device's cache directly.
 public:
  DeviceCache& cache(c10::DeviceIndex device) {
    return cacheFor(checked(device));
  }

 private:
  bool created(c10::DeviceIndex device) {
    return caches_[device].load(std::memory_order_acquire) != nullptr;
  }

  // Every allocation and free looks its device's cache up: once created, a
  // load, not a lock (a lock here was a second mutex per allocation and per
  // free, beside the cache's own).
  DeviceCache& cacheFor(c10::DeviceIndex device) {
    std::atomic<DeviceCache*>& slot = caches_[device];
    if (DeviceCache* cache = slot.load(std::memory_order_acquire)) {
      return *cache;
    }
    std::lock_guard<std::mutex> lock(creation_mutex_);
    DeviceCache* cache = slot.load(std::memory_order_relaxed);
    if (cache == nullptr) {
      cache = new DeviceCache(device);  // lives as long as the allocator
      slot.store(cache, std::memory_order_release);
    }
    return *cache;
  }

  std::mutex creation_mutex_;
  std::array<std::atomic<DeviceCache*>, kMaxDevices> caches_{};
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

void beginAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t pool,
                         uint64_t capture_id) {
  instance().cache(device).beginAllocateToPool(pool, capture_id);
}

void endAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t pool) {
  instance().cache(device).endAllocateToPool(pool);
}

void releasePool(c10::DeviceIndex device, c10::MempoolId_t pool) {
  instance().cache(device).releasePool(pool);
}

}  // namespace mydev
