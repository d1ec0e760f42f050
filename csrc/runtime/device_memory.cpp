#include "device_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "address_space.h"
#include "align.h"
#include "error.h"
#include "lifecycle.h"

namespace mydev_sim {
namespace {

int create_memfd(const std::string& name, size_t size) {
  const int fd = memfd_create(name.c_str(), MFD_CLOEXEC);
  if (fd < 0) return -1;
  // Sparse: pages are only allocated when first written.
  if (ftruncate(fd, off_t(size)) != 0) {
    const int err = errno;
    close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

char* kernel_side(const void* device_address) {
  return static_cast<char*>(kernel_address(*address_space(), device_address));
}

}  // namespace

mydevError_t DeviceMemory::create(int device, char* slot_base, size_t slot_size,
                                  size_t capacity, DeviceMemory** out) {
  const size_t slot_pages = slot_size / kDevicePageSize;
  const size_t table_bytes =
      round_up(slot_pages * sizeof(uint32_t), page_size());
  const int memory_fd = create_memfd(format("mydev:%d", device), capacity);
  const int table_fd =
      memory_fd < 0
          ? -1
          : create_memfd(format("mydev:%d page table", device), table_bytes);
  void* table = table_fd < 0
                    ? MAP_FAILED
                    : mmap(nullptr, table_bytes, PROT_READ | PROT_WRITE,
                           MAP_SHARED, table_fd, 0);
  if (table == MAP_FAILED) {
    const int err = errno;
    if (memory_fd >= 0) close(memory_fd);
    if (table_fd >= 0) close(table_fd);
    return fail(mydevErrorMemoryAllocation,
                "mydev:%d: cannot create the device memory (%zu bytes): %s",
                device, capacity, std::strerror(err));
  }
  *out = new DeviceMemory(device, slot_base, slot_pages, capacity, memory_fd,
                          table_fd, static_cast<uint32_t*>(table));
  note_device_activated();  // MAP_SHARED: a forked child would share it
  return mydevSuccess;
}

DeviceMemory::DeviceMemory(int device, char* slot_base, size_t slot_pages,
                           size_t capacity, int memory_fd, int page_table_fd,
                           uint32_t* page_table)
    : device_(device),
      slot_base_(slot_base),
      slot_pages_(slot_pages),
      capacity_(capacity),
      page_(kDevicePageSize),
      memory_fd_(memory_fd),
      page_table_fd_(page_table_fd),
      page_table_(page_table),
      physical_(capacity / kDevicePageSize),
      addresses_(slot_pages) {}

mydevError_t DeviceMemory::out_of_memory(size_t bytes) {
  return fail(mydevErrorMemoryAllocation,
              "mydev:%d out of memory: tried to allocate %zu bytes; %zu bytes "
              "free of %zu total",
              device_, bytes, capacity_ - used_bytes(), capacity_);
}

// Backs pages [first, first + count) of the slot, all unmapped, with free
// physical pages: one contiguous run if one is long enough, else the longest
// runs until the request is met.
mydevError_t DeviceMemory::map_pages(size_t first, size_t count) {
  if (physical_.free_total() < count) return out_of_memory(count * page_);
  std::vector<std::pair<size_t, size_t>> runs;  // (physical page, pages)
  size_t physical = 0;
  if (physical_.allocate(count, &physical)) {
    runs.emplace_back(physical, count);
  } else {
    for (size_t gathered = 0, got = 0; gathered < count; gathered += got) {
      physical_.allocate_part(count - gathered, &physical, &got);
      runs.emplace_back(physical, got);
    }
  }
  size_t page = first;
  for (const auto& [start, length] : runs) {
    if (!map_kernel_pages(kernel_side(slot_base_ + page * page_),
                          length * page_, memory_fd_, start * page_)) {
      const int err = errno;
      for (size_t mapped = first; mapped < page; ++mapped) {
        page_table_[mapped] = kUnmapped;
      }
      for (const auto& [unused_start, unused_length] : runs) {
        physical_.release(unused_start, unused_length);
      }
      unmap_kernel_pages(kernel_side(slot_base_ + first * page_),
                         count * page_);
      return fail(mydevErrorMemoryAllocation,
                  "mydev:%d: cannot map %zu bytes of device memory: %s",
                  device_, count * page_, std::strerror(err));
    }
    for (size_t i = 0; i < length; ++i) {
      page_table_[page + i] = uint32_t(start + i + 1);
    }
    page += length;
  }
  used_pages_.fetch_add(count, std::memory_order_relaxed);
  return mydevSuccess;
}

// Unmaps pages [first, first + count) of the slot and gives their physical
// pages back, to this device and to the OS (which is what makes emptying the
// caching allocator return memory).
void DeviceMemory::unmap_pages(size_t first, size_t count) {
  unmap_kernel_pages(kernel_side(slot_base_ + first * page_), count * page_);
  size_t returned = 0;
  for (size_t page = first; page < first + count;) {
    const uint32_t entry = page_table_[page];
    if (entry == kUnmapped) {
      ++page;
      continue;
    }
    size_t length = 0;
    while (page + length < first + count &&
           page_table_[page + length] == entry + length) {
      page_table_[page + length] = kUnmapped;
      ++length;
    }
    const size_t physical = entry - 1;
    // Under the lock: once the pages are free again, a concurrent mapping
    // could otherwise get data that the punch then zeroes.
    (void)fallocate(memory_fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                    off_t(physical * page_), off_t(length * page_));
    physical_.release(physical, length);
    returned += length;
    page += length;
  }
  used_pages_.fetch_sub(returned, std::memory_order_relaxed);
}

std::map<size_t, DeviceMemory::Range>::iterator DeviceMemory::range_at(
    const void* ptr) {
  const size_t offset = size_t(static_cast<const char*>(ptr) - slot_base_);
  if (offset % page_ != 0) return ranges_.end();
  return ranges_.find(offset / page_);
}

std::map<size_t, DeviceMemory::Range>::iterator DeviceMemory::range_containing(
    size_t first, size_t count) {
  auto range = ranges_.upper_bound(first);
  if (range == ranges_.begin()) return ranges_.end();
  --range;
  if (first + count > range->first + range->second.pages) return ranges_.end();
  return range;
}

mydevError_t DeviceMemory::allocate(size_t size, void** out) {
  if (size > capacity_) return out_of_memory(size);
  const size_t pages = round_up(size, page_) / page_;
  // One unmapped page after each allocation: a kernel running past the end
  // of a buffer touches an illegal address instead of its neighbour.
  constexpr size_t kGuardPages = 1;
  std::lock_guard<std::mutex> lock(mutex_);
  size_t first = 0;
  if (!addresses_.allocate(pages + kGuardPages, &first)) {
    return fail(mydevErrorMemoryAllocation,
                "mydev:%d out of device address space: tried to allocate %zu "
                "bytes",
                device_, size);
  }
  const mydevError_t status = physical_.free_total() < pages
                                  ? out_of_memory(size)
                                  : map_pages(first, pages);
  if (status != mydevSuccess) {
    addresses_.release(first, pages + kGuardPages);
    return status;
  }
  ranges_.emplace(first, Range{pages, kGuardPages, false});
  *out = slot_base_ + first * page_;
  return mydevSuccess;
}

mydevError_t DeviceMemory::release(void* ptr) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto range = range_at(ptr);
  if (range == ranges_.end() || range->second.reservation) {
    return fail(mydevErrorInvalidValue,
                "mydevFree: %p is not the start of a live allocation on "
                "mydev:%d (double free, an interior pointer, or a "
                "reservation, which mydevMemAddressFree releases)",
                ptr, device_);
  }
  unmap_pages(range->first, range->second.pages);
  addresses_.release(range->first,
                     range->second.pages + range->second.guard_pages);
  ranges_.erase(range);
  return mydevSuccess;
}

mydevError_t DeviceMemory::reserve(size_t size, void** out) {
  std::lock_guard<std::mutex> lock(mutex_);
  const size_t pages = size / page_;
  size_t first = 0;
  if (!addresses_.allocate(pages, &first)) {
    return fail(mydevErrorMemoryAllocation,
                "mydevMemAddressReserve: mydev:%d has no free range of %zu "
                "device addresses",
                device_, size);
  }
  ranges_.emplace(first, Range{pages, 0, true});
  *out = slot_base_ + first * page_;
  return mydevSuccess;
}

mydevError_t DeviceMemory::free_reservation(void* ptr, size_t size) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto range = range_at(ptr);
  if (range == ranges_.end() || !range->second.reservation ||
      range->second.pages * page_ != size) {
    return fail(mydevErrorInvalidValue,
                "mydevMemAddressFree: [%p, +%zu bytes) is not a reservation "
                "of mydev:%d",
                ptr, size, device_);
  }
  for (size_t page = range->first; page < range->first + range->second.pages;
       ++page) {
    if (page_table_[page] != kUnmapped) {
      return fail(mydevErrorInvalidValue,
                  "mydevMemAddressFree: the reservation at %p still has "
                  "mapped pages (mydevMemUnmap them first)",
                  ptr);
    }
  }
  addresses_.release(range->first, range->second.pages);
  ranges_.erase(range);
  return mydevSuccess;
}

mydevError_t DeviceMemory::check_inside_reservation(const char* api, void* ptr,
                                                    size_t size) {
  const auto range = range_containing(page_of(ptr), size / page_);
  if (range == ranges_.end() || !range->second.reservation) {
    return fail(mydevErrorInvalidValue,
                "%s: [%p, +%zu bytes) is not inside one reservation of "
                "mydev:%d",
                api, ptr, size, device_);
  }
  return mydevSuccess;
}

mydevError_t DeviceMemory::map(void* ptr, size_t size) {
  const size_t first = page_of(ptr);
  const size_t count = size / page_;
  std::lock_guard<std::mutex> lock(mutex_);
  if (const mydevError_t error =
          check_inside_reservation("mydevMemMap", ptr, size)) {
    return error;
  }
  for (size_t page = first; page < first + count; ++page) {
    if (page_table_[page] != kUnmapped) {
      return fail(mydevErrorInvalidValue, "mydevMemMap: %p is already mapped",
                  static_cast<void*>(slot_base_ + page * page_));
    }
  }
  return map_pages(first, count);
}

mydevError_t DeviceMemory::unmap(void* ptr, size_t size) {
  const size_t first = page_of(ptr);
  const size_t count = size / page_;
  std::lock_guard<std::mutex> lock(mutex_);
  if (const mydevError_t error =
          check_inside_reservation("mydevMemUnmap", ptr, size)) {
    return error;
  }
  unmap_pages(first, count);
  return mydevSuccess;
}

bool DeviceMemory::find(const void* ptr, char** base, size_t* size) {
  const size_t page = page_of(ptr);
  std::lock_guard<std::mutex> lock(mutex_);
  const auto range = range_containing(page, 1);
  if (range == ranges_.end()) return false;
  *base = slot_base_ + range->first * page_;
  *size = range->second.pages * page_;
  return true;
}

}  // namespace mydev_sim
