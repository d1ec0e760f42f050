#include "arena.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <algorithm>
#include <iterator>

#include "align.h"
#include "error.h"
#include "lifecycle.h"

namespace mydev_sim {
namespace {

// Frees at least this large give their pages back to the OS, which is what
// makes emptying the caching allocator above really return memory.
constexpr size_t kReturnPagesThreshold = size_t{2} << 20;

}  // namespace

mydevError_t Arena::create(int device, char* base, size_t capacity,
                           Arena** out) {
  const std::string name = format("mydev:%d", device);
  const int fd = memfd_create(name.c_str(), MFD_CLOEXEC);
  if (fd < 0) {
    return fail(mydevErrorMemoryAllocation,
                "mydev:%d: cannot create the memory arena: memfd_create: %s",
                device, std::strerror(errno));
  }
  // Sparse: pages are only allocated when first written.
  if (ftruncate(fd, off_t(capacity)) != 0) {
    const int err = errno;
    close(fd);
    return fail(mydevErrorMemoryAllocation,
                "mydev:%d: cannot size the memory arena to %zu bytes: %s",
                device, capacity, std::strerror(err));
  }
  if (mmap(base, capacity, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
           0) == MAP_FAILED) {
    const int err = errno;
    close(fd);
    return fail(mydevErrorMemoryAllocation,
                "mydev:%d: cannot map the %zu-byte memory arena: %s", device,
                capacity, std::strerror(err));
  }
  *out = new Arena(device, base, capacity, fd);
  note_device_activated();  // MAP_SHARED: a forked child would share it
  return mydevSuccess;
}

Arena::Arena(int device, char* base, size_t capacity, int fd)
    : device_(device), base_(base), capacity_(capacity), fd_(fd) {
  add_free(0, capacity);
}

void Arena::add_free(size_t offset, size_t size) {
  free_by_offset_.emplace(offset, size);
  free_by_size_.emplace(size, offset);
}

void Arena::remove_free(std::map<size_t, size_t>::iterator block) {
  free_by_size_.erase({block->second, block->first});
  free_by_offset_.erase(block);
}

mydevError_t Arena::allocate(size_t size, void** out) {
  const size_t rounded =
      size <= capacity_ ? round_up(size, kAlignment) : capacity_ + 1;
  std::lock_guard<std::mutex> lock(mutex_);
  const auto best = free_by_size_.lower_bound({rounded, 0});
  if (best == free_by_size_.end()) {
    const size_t largest =
        free_by_size_.empty() ? 0 : free_by_size_.rbegin()->first;
    return fail(mydevErrorMemoryAllocation,
                "mydev:%d out of memory: tried to allocate %zu bytes; %zu "
                "bytes free of %zu total (largest free block %zu)",
                device_, size, capacity_ - allocated_bytes(), capacity_,
                largest);
  }
  const size_t block_size = best->first;
  const size_t offset = best->second;
  remove_free(free_by_offset_.find(offset));
  // The remainder cannot have a free right neighbour: free blocks are always
  // coalesced, so it needs no merging.
  if (block_size > rounded) add_free(offset + rounded, block_size - rounded);
  live_.emplace(offset, rounded);
  allocated_.fetch_add(rounded, std::memory_order_relaxed);
  *out = base_ + offset;
  return mydevSuccess;
}

mydevError_t Arena::release(void* ptr) {
  const size_t offset = size_t(static_cast<char*>(ptr) - base_);
  std::lock_guard<std::mutex> lock(mutex_);
  const auto live = live_.find(offset);
  if (live == live_.end()) {
    return fail(mydevErrorInvalidValue,
                "mydevFree: %p is not the start of a live allocation on "
                "mydev:%d (double free, or an interior pointer?)",
                ptr, device_);
  }
  const size_t size = live->second;
  live_.erase(live);
  allocated_.fetch_sub(size, std::memory_order_relaxed);

  size_t begin = offset;
  size_t end = offset + size;
  const auto next = free_by_offset_.lower_bound(offset);
  const auto prev =
      next == free_by_offset_.begin() ? free_by_offset_.end() : std::prev(next);
  if (next != free_by_offset_.end() && next->first == end) {
    end += next->second;
    remove_free(next);
  }
  if (prev != free_by_offset_.end() && prev->first + prev->second == begin) {
    begin = prev->first;
    remove_free(prev);
  }
  add_free(begin, end - begin);

  if (size >= kReturnPagesThreshold) {
    // The pages the allocation touched, including boundary pages that the
    // merged free neighbours leave entirely free.
    const size_t page = page_size();
    const size_t first =
        round_up(std::max(begin, round_down(offset, page)), page);
    const size_t last =
        round_down(std::min(end, round_up(offset + size, page)), page);
    if (last > first) return_pages(first, last);
  }
  return mydevSuccess;
}

// Under the arena lock: once the range is back in the free list, a concurrent
// allocation could otherwise write data that the punch then zeroes.
void Arena::return_pages(size_t begin, size_t end) {
  // Failure only means the memory stays resident, which is not an error.
  (void)fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                  off_t(begin), off_t(end - begin));
}

bool Arena::find(const void* ptr, char** base, size_t* size) {
  const size_t offset = size_t(static_cast<const char*>(ptr) - base_);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.upper_bound(offset);
  if (it == live_.begin()) return false;
  --it;
  if (offset >= it->first + it->second) return false;
  *base = base_ + it->first;
  *size = it->second;
  return true;
}

}  // namespace mydev_sim
