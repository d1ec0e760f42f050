// Best-fit allocation of ranges [offset, offset + length) of an integer
// interval, with coalescing on release. The device memory uses one for its
// physical pages and one for its device address space, in units of pages.
// Not thread-safe: the owner locks.
#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <utility>

namespace mydev_sim {

class RangeAllocator {
 public:
  explicit RangeAllocator(size_t length) {
    if (length > 0) add(0, length);
  }

  // The smallest free range that holds `length` (its start in *offset), or
  // false if no single free range is that long.
  bool allocate(size_t length, size_t* offset);
  // Up to `length` units from the start of the longest free range: what
  // gathers a request from scattered free ranges. False if nothing is free.
  bool allocate_part(size_t length, size_t* offset, size_t* got);
  // Exactly [offset, offset + length), if it is entirely free.
  bool allocate_at(size_t offset, size_t length);
  // Gives back a range that was allocated.
  void release(size_t offset, size_t length);

  size_t free_total() const { return free_total_; }

 private:
  void add(size_t offset, size_t length);
  void remove(std::map<size_t, size_t>::iterator range);

  std::map<size_t, size_t> by_offset_;             // offset -> length
  std::set<std::pair<size_t, size_t>> by_length_;  // (length, offset)
  size_t free_total_ = 0;
};

}  // namespace mydev_sim
