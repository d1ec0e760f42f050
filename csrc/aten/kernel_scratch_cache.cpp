#include "kernel_scratch_cache.h"

#include <atomic>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace mydev {
namespace {

struct ScratchCache {
  std::mutex mutex;
  // Blocks handed out, by address: their size and the allocation that owns
  // them.
  std::unordered_map<void*, std::pair<size_t, c10::DataPtr>> in_use;
  std::multimap<size_t, c10::DataPtr> free_blocks;
  size_t owned_bytes = 0;  // in use and free
  size_t reuses = 0;
  // in_use.size(), read without the lock: most frees in a process are of
  // other memory and must not take it.
  std::atomic<size_t> in_use_count{0};
};

ScratchCache& cache() {
  static auto* instance = new ScratchCache();  // leaked: frees at exit use it
  return *instance;
}

void returnToCache(void* address) { releaseKernelScratch(address); }

// Frees free blocks until `nbytes` more fit under the cap; false if they
// cannot (the blocks in use alone are too many). Holds the lock.
bool makeRoom(ScratchCache& scratch, size_t nbytes) {
  while (scratch.owned_bytes + nbytes > kMaxCachedBytes &&
         !scratch.free_blocks.empty()) {
    auto largest = std::prev(scratch.free_blocks.end());
    scratch.owned_bytes -= largest->first;
    scratch.free_blocks.erase(largest);
  }
  return scratch.owned_bytes + nbytes <= kMaxCachedBytes;
}

}  // namespace

c10::DataPtr allocateKernelScratch(c10::Allocator& allocator, size_t nbytes) {
  if (nbytes < kMinCachedBytes) {
    return allocator.allocate(nbytes);
  }
  ScratchCache& scratch = cache();
  c10::DataPtr block;
  {
    const std::lock_guard<std::mutex> lock(scratch.mutex);
    auto found = scratch.free_blocks.find(nbytes);
    if (found != scratch.free_blocks.end()) {
      block = std::move(found->second);
      scratch.free_blocks.erase(found);
      ++scratch.reuses;
    } else if (!makeRoom(scratch, nbytes)) {
      return allocator.allocate(nbytes);
    } else {
      scratch.owned_bytes += nbytes;  // reserved; allocated below
    }
  }
  if (!block) {
    try {
      block = allocator.allocate(nbytes);
    } catch (...) {
      const std::lock_guard<std::mutex> lock(scratch.mutex);
      scratch.owned_bytes -= nbytes;
      throw;
    }
  }
  void* address = block.get();
  const std::lock_guard<std::mutex> lock(scratch.mutex);
  scratch.in_use.emplace(address, std::make_pair(nbytes, std::move(block)));
  scratch.in_use_count.store(scratch.in_use.size(), std::memory_order_release);
  return {address, address, &returnToCache, c10::Device(c10::kCPU)};
}

bool releaseKernelScratch(void* address) {
  ScratchCache& scratch = cache();
  if (scratch.in_use_count.load(std::memory_order_acquire) == 0) {
    return false;
  }
  const std::lock_guard<std::mutex> lock(scratch.mutex);
  auto found = scratch.in_use.find(address);
  if (found == scratch.in_use.end()) {
    return false;
  }
  auto [nbytes, block] = std::move(found->second);
  scratch.in_use.erase(found);
  scratch.in_use_count.store(scratch.in_use.size(), std::memory_order_release);
  scratch.free_blocks.emplace(nbytes, std::move(block));
  return true;
}

KernelScratchStats kernelScratchStats() {
  ScratchCache& scratch = cache();
  const std::lock_guard<std::mutex> lock(scratch.mutex);
  return {scratch.owned_bytes, scratch.reuses};
}

}  // namespace mydev
