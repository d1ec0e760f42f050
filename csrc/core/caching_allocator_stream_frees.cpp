// Frees of blocks that other streams used (record_stream): the block goes
// back to its free list only when events recorded on those streams at free
// time have completed, so a later allocation on the owning stream cannot
// overwrite memory a queued kernel elsewhere still reads.
#include <algorithm>

#include "caching_allocator_device_cache.h"
#include "memory_history.h"
#include "mydev_stream.h"

namespace mydev::caching_allocator {

using c10::CachingDeviceAllocator::TraceEntry;

void DeviceCache::recordStream(Block* block, c10::Stream stream) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  if (MydevStream(stream).raw() == block->stream) {
    return;  // the owning stream orders its own reuse
  }
  if (std::find(block->stream_uses.begin(), block->stream_uses.end(), stream) ==
      block->stream_uses.end()) {
    block->stream_uses.push_back(stream);
  }
}

bool DeviceCache::deferFreeForStreamUses(Block* block) {
  if (block->stream_uses.empty()) {
    return false;
  }
  // Other streams may still read it: reuse waits for their work.
  for (const c10::Stream& use : block->stream_uses) {
    MydevEvent event;
    event.record(MydevStream(use));
    pending_events_.emplace_back(std::move(event), block);
    block->pending_events += 1;
  }
  block->stream_uses.clear();
  return true;
}

void DeviceCache::processPendingEvents() {
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

void DeviceCache::waitForPendingEvents() {
  for (const auto& pending : pending_events_) {
    pending.first.synchronize();
  }
  processPendingEvents();
}

}  // namespace mydev::caching_allocator
