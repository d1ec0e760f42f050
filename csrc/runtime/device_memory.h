// A device's memory, as a GPU's virtual memory manager has it: physical
// memory in pages (a memfd of the device's capacity, allocated page by page),
// and the device's slot of device addresses (address_space.h), reserved in
// ranges and backed by physical pages on demand. Since a range's pages need
// not be contiguous in the memfd, any free physical memory is usable
// whatever its fragmentation.
//
// A per-page table (device page -> physical page) lives in a second memfd, so
// that a peer process opening an IPC handle can find the pages of the
// allocation and map them into its own address space (ipc.cpp).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

#include "mydev_runtime.h"
#include "range_allocator.h"

namespace mydev_sim {

class DeviceMemory {
 public:
  static mydevError_t create(int device, char* slot_base, size_t slot_size,
                             size_t capacity, DeviceMemory** out);
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  // mydevMalloc / mydevFree: a fresh address range, backed at once.
  mydevError_t allocate(size_t size, void** out);
  mydevError_t release(void* ptr);
  // mydevMemAddressReserve / mydevMemAddressFree / mydevMemMap /
  // mydevMemUnmap. Sizes are multiples of kDevicePageSize.
  mydevError_t reserve(size_t size, void** out);
  mydevError_t free_reservation(void* ptr, size_t size);
  mydevError_t map(void* ptr, size_t size);
  mydevError_t unmap(void* ptr, size_t size);

  // The allocation or reservation containing `ptr`, if any.
  bool find(const void* ptr, char** base, size_t* size);

  int device() const { return device_; }
  char* slot_base() const { return slot_base_; }
  size_t capacity() const { return capacity_; }
  size_t used_bytes() const {
    return used_pages_.load(std::memory_order_relaxed) * page_;
  }
  // For peer processes (ipc.cpp): the physical memory and the page table,
  // kept open for the process's lifetime.
  int memory_fd() const { return memory_fd_; }
  int page_table_fd() const { return page_table_fd_; }

  // Page table entries: physical page + 1, or kUnmapped.
  static constexpr uint32_t kUnmapped = 0;

 private:
  struct Range {
    size_t pages;
    size_t guard_pages;  // unmapped addresses after an allocation
    bool reservation;    // from reserve(), else from allocate()
  };

  DeviceMemory(int device, char* slot_base, size_t slot_pages, size_t capacity,
               int memory_fd, int page_table_fd, uint32_t* page_table);

  size_t page_of(const void* ptr) const {
    return size_t(static_cast<const char*>(ptr) - slot_base_) / page_;
  }
  // Under mutex_.
  mydevError_t out_of_memory(size_t bytes);
  mydevError_t map_pages(size_t first, size_t count);
  void unmap_pages(size_t first, size_t count);
  // The range starting at `ptr`, or end().
  std::map<size_t, Range>::iterator range_at(const void* ptr);
  // mydevSuccess if [ptr, ptr + size) lies inside one reservation, else the
  // error `api` (the driver call checking) returns.
  mydevError_t check_inside_reservation(const char* api, void* ptr,
                                        size_t size);
  // The range containing [first, first + count) pages, or end().
  std::map<size_t, Range>::iterator range_containing(size_t first,
                                                     size_t count);

  const int device_;
  char* const slot_base_;
  const size_t slot_pages_;
  const size_t capacity_;
  const size_t page_;
  const int memory_fd_;
  const int page_table_fd_;
  uint32_t* const page_table_;  // slot_pages_ entries, MAP_SHARED

  std::mutex mutex_;
  RangeAllocator physical_;         // in pages of the memfd
  RangeAllocator addresses_;        // in pages of the slot
  std::map<size_t, Range> ranges_;  // first page -> range
  std::atomic<size_t> used_pages_{0};
};

}  // namespace mydev_sim
