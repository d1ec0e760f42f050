// A device's memory: one memfd of the device's capacity, mapped MAP_SHARED at
// the device's slot of the runtime's address reservation, sub-allocated with
// a best-fit free list. The memfd is what lets a peer process map this
// device's memory (ipc.cpp).
#pragma once

#include <atomic>
#include <cstddef>
#include <map>
#include <mutex>
#include <set>
#include <utility>

#include "mydev_runtime.h"

namespace mydev_sim {

class Arena {
 public:
  static constexpr size_t kAlignment = 512;

  // Maps the memfd over [base, base + capacity), which must be reserved.
  static mydevError_t create(int device, char* base, size_t capacity,
                             Arena** out);
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  mydevError_t allocate(size_t size, void** out);
  mydevError_t release(void* ptr);
  // The live allocation containing `ptr`, if any.
  bool find(const void* ptr, char** base, size_t* size);

  int device() const { return device_; }
  char* base() const { return base_; }
  size_t capacity() const { return capacity_; }
  // The memfd behind the arena, for peer processes (ipc.cpp).
  int fd() const { return fd_; }

  size_t allocated_bytes() const {
    return allocated_.load(std::memory_order_relaxed);
  }

 private:
  Arena(int device, char* base, size_t capacity, int fd);

  void add_free(size_t offset, size_t size);
  void remove_free(std::map<size_t, size_t>::iterator block);
  void return_pages(size_t begin, size_t end);

  const int device_;
  char* const base_;
  const size_t capacity_;
  // Kept open for the process's lifetime: it is what a peer process maps
  // (through an IPC handle) to reach this device's memory.
  const int fd_;

  std::mutex mutex_;
  std::map<size_t, size_t> free_by_offset_;           // offset -> size
  std::set<std::pair<size_t, size_t>> free_by_size_;  // (size, offset)
  std::map<size_t, size_t> live_;                     // offset -> size
  std::atomic<size_t> allocated_{0};
};

}  // namespace mydev_sim
