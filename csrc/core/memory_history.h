// The recorder behind torch.mydev.memory._record_memory_history: what the
// caching allocator did (alloc, free_requested, free_completed,
// segment_alloc, segment_free, oom), per device, with the stack of the call
// that did it, in c10's TraceEntry form so that snapshots have cuda's layout.
//
// The allocator calls these hooks; each costs one relaxed atomic load while
// recording is off.
#pragma once

#include <c10/core/CachingDeviceAllocator.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <set>
#include <vector>

namespace mydev::memory_history {

using c10::CachingDeviceAllocator::RecordContext;
using c10::CachingDeviceAllocator::TraceEntry;

struct Settings {
  bool enabled = false;     // "state" or "all"
  bool keep_trace = false;  // "all": keep the history of actions too
  RecordContext context = RecordContext::NEVER;
  bool cpp_stacks = false;  // stacks="all": C++ frames as well as Python
  size_t max_entries = 0;   // per device; older entries are overwritten
  bool clear_history = false;
  std::set<TraceEntry::Action> skip_actions;
};

// Validated by the caller (the Python binding).
void configure(const Settings& settings);

extern std::atomic<bool> g_recording;
inline bool recording() { return g_recording.load(std::memory_order_relaxed); }

// The stack of the allocator call in progress on this thread, gathered
// before the allocator takes its lock: gathering Python frames takes the GIL,
// which another thread may hold while it waits for the allocator.
class CallContext {
 public:
  // `action`: the call, TraceEntry::ALLOC or TraceEntry::FREE_REQUESTED.
  explicit CallContext(TraceEntry::Action action) {
    if (recording()) begin(action);
  }
  ~CallContext() {
    if (active_) end();
  }
  CallContext(const CallContext&) = delete;
  CallContext& operator=(const CallContext&) = delete;

 private:
  void begin(TraceEntry::Action action);
  void end();

  std::shared_ptr<c10::GatheredContext> previous_;
  bool active_ = false;
};

void recordAction(TraceEntry::Action action, c10::DeviceIndex device,
                  size_t addr, size_t size, void* stream);

// One action of the allocator. `stream` is the driver stream handle;
// for OOM `addr` is the device's free bytes, as in c10's TraceEntry.
inline void record(TraceEntry::Action action, c10::DeviceIndex device,
                   size_t addr, size_t size, void* stream) {
  if (recording()) recordAction(action, device, addr, size, stream);
}

// The stack that allocated the live block at `addr`, if recorded.
std::shared_ptr<c10::GatheredContext> allocationContext(size_t addr);

// Entries of `device`, oldest first; time_.t_ holds Unix microseconds.
std::vector<TraceEntry> trace(c10::DeviceIndex device);

}  // namespace mydev::memory_history
