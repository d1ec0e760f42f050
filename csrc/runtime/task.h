// A unit of a stream's work, as its queue holds it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "mydev_runtime.h"

namespace mydev_sim {

struct EventRecord;
struct PendingActivity;

enum class TaskKind : uint8_t { Kernel, Copy, Fill, EventMarker, WaitEvent };

// Plain data, copied into the stream's queue (task_queue.h).
struct Task {
  TaskKind kind;
  int fill_value;
  const char* name;    // Kernel
  mydevKernelFn_t fn;  // Kernel
  void* dst;           // Kernel: user_data
  const void* src;
  size_t count;
  EventRecord* record;  // EventMarker, WaitEvent: owns one reference
  // Set by enqueue while activity recording is on (activity.h); owned.
  PendingActivity* activity;
  // Kernel from mydevLaunchKernelEx: called on user_data once the kernel
  // cannot run any more (nullptr: fn consumes its data).
  mydevKernelFn_t release;

  static Task kernel(const char* name, mydevKernelFn_t fn, void* user_data,
                     mydevKernelFn_t release = nullptr) {
    return Task{TaskKind::Kernel, 0, name,    fn,      user_data,
                nullptr,          0, nullptr, nullptr, release};
  }
  static Task copy(void* dst, const void* src, size_t count) {
    return Task{TaskKind::Copy, 0, nullptr, nullptr, dst, src, count, nullptr};
  }
  static Task fill(void* dst, int value, size_t count) {
    return Task{TaskKind::Fill, value, nullptr, nullptr, dst,
                nullptr,        count, nullptr};
  }
  static Task marker(EventRecord* record) {
    return Task{TaskKind::EventMarker,
                0,
                nullptr,
                nullptr,
                nullptr,
                nullptr,
                0,
                record};
  }
  static Task wait_event(EventRecord* record) {
    return Task{
        TaskKind::WaitEvent, 0, nullptr, nullptr, nullptr, nullptr, 0, record};
  }
};

}  // namespace mydev_sim
