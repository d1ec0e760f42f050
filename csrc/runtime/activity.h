// Activity recording inside the driver (the mydevActivity* API): the hooks
// the enqueueing calls and the stream executors use.
//
// The protocol: an API entry opens an ActivityApiScope (so its host-side
// start is known), Stream::enqueue attaches a PendingActivity to the task when
// recording is on, and the executor finishes it with the times the work ran.
// Everything costs one relaxed load while recording is off.
#pragma once

#include <atomic>
#include <cstdint>

#include "mydev_runtime.h"

namespace mydev_sim {

struct Task;
class Stream;

extern std::atomic<bool> g_activity_enabled;

inline bool activity_enabled() {
  return g_activity_enabled.load(std::memory_order_relaxed);
}

// Nanoseconds of the records' clock (steady_clock, as event timings).
int64_t activity_now();

// Names the driver call that is enqueueing work on this thread, and when it
// started, for the records the call produces.
class ActivityApiScope {
 public:
  explicit ActivityApiScope(const char* api);
  ~ActivityApiScope();
  ActivityApiScope(const ActivityApiScope&) = delete;
  ActivityApiScope& operator=(const ActivityApiScope&) = delete;

 private:
  const char* previous_api_;
  int64_t previous_start_;
};

// A record whose work has not run yet; owned by the task that carries it.
struct PendingActivity {
  mydevActivityRecord record;
};

// Called by Stream::enqueue when recording is on: the host half of a record
// for `task` (kernel, copy or fill) on `stream`; nullptr for other tasks.
PendingActivity* activity_begin(const Task& task, Stream* stream);
// Called by the executor: completes the record with the work's times and
// publishes it to mydevActivityFlush.
void activity_finish(PendingActivity* pending, int64_t start, int64_t end);

// Copies the driver does on the calling thread (pageable host memory): the
// host half and the work are one call.
class ActivityHostCopy {
 public:
  ActivityHostCopy(Stream* stream, void* dst, const void* src, size_t count);
  ~ActivityHostCopy();
  ActivityHostCopy(const ActivityHostCopy&) = delete;
  ActivityHostCopy& operator=(const ActivityHostCopy&) = delete;

 private:
  PendingActivity* pending_ = nullptr;
  int64_t start_ = 0;
};

}  // namespace mydev_sim
