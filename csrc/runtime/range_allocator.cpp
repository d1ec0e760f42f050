#include "range_allocator.h"

#include <iterator>

namespace mydev_sim {

void RangeAllocator::add(size_t offset, size_t length) {
  by_offset_.emplace(offset, length);
  by_length_.emplace(length, offset);
  free_total_ += length;
}

void RangeAllocator::remove(std::map<size_t, size_t>::iterator range) {
  free_total_ -= range->second;
  by_length_.erase({range->second, range->first});
  by_offset_.erase(range);
}

bool RangeAllocator::allocate(size_t length, size_t* offset) {
  const auto best = by_length_.lower_bound({length, 0});
  if (best == by_length_.end()) return false;
  const size_t found_length = best->first;
  *offset = best->second;
  remove(by_offset_.find(*offset));
  // The remainder cannot have a free right neighbour: free ranges are always
  // coalesced.
  if (found_length > length) add(*offset + length, found_length - length);
  return true;
}

bool RangeAllocator::allocate_part(size_t length, size_t* offset, size_t* got) {
  if (by_length_.empty()) return false;
  const size_t longest = by_length_.rbegin()->first;
  *got = longest < length ? longest : length;
  return allocate(*got, offset);
}

bool RangeAllocator::allocate_at(size_t offset, size_t length) {
  auto range = by_offset_.upper_bound(offset);
  if (range == by_offset_.begin()) return false;
  --range;
  const size_t start = range->first;
  const size_t end = start + range->second;
  if (offset + length > end) return false;
  remove(range);
  if (start < offset) add(start, offset - start);
  if (offset + length < end) add(offset + length, end - offset - length);
  return true;
}

void RangeAllocator::release(size_t offset, size_t length) {
  size_t begin = offset;
  size_t end = offset + length;
  const auto next = by_offset_.lower_bound(offset);
  const auto prev =
      next == by_offset_.begin() ? by_offset_.end() : std::prev(next);
  if (next != by_offset_.end() && next->first == end) {
    end += next->second;
    remove(next);
  }
  if (prev != by_offset_.end() && prev->first + prev->second == begin) {
    begin = prev->first;
    remove(prev);
  }
  add(begin, end - begin);
}

}  // namespace mydev_sim
