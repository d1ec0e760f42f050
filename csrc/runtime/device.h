// The device table: per device its arena (created on first malloc), kernel
// gate, default stream, live streams and pending-failure slot.
#pragma once

#include <atomic>
#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

#include "config.h"
#include "kernel_gate.h"
#include "mydev_runtime.h"

namespace mydev_sim {

class Arena;
class Stream;

class Device {
 public:
  Device(int index, size_t capacity, char* arena_base, int kernel_slots);
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  int index() const { return index_; }
  size_t capacity() const { return capacity_; }
  KernelGate& gate() { return gate_; }

  // Creates the arena on first use, so unused devices cost nothing.
  mydevError_t arena(Arena** out);
  // nullptr until the first allocation on the device.
  Arena* existing_arena() const {
    return arena_.load(std::memory_order_acquire);
  }

  // Created on first use; never destroyed.
  mydevError_t default_stream(Stream** out);

  void add_stream(Stream* stream);
  void remove_stream(Stream* stream);
  // Each returned stream is retained; the caller releases it.
  std::vector<Stream*> retain_streams();

  // A failure of enqueued work. The first one is kept until reported; later
  // ones before that report are counted and the report mentions them.
  void record_failure(std::string message);
  // mydevErrorLaunchFailure with the recorded message (and clears it), or
  // success if nothing failed since the last report.
  mydevError_t report_failure();

 private:
  const int index_;
  const size_t capacity_;
  char* const arena_base_;
  KernelGate gate_;

  std::mutex arena_mutex_;
  std::atomic<Arena*> arena_{nullptr};

  std::mutex default_stream_mutex_;
  std::atomic<Stream*> default_stream_{nullptr};

  std::mutex streams_mutex_;
  std::vector<Stream*> streams_;

  std::atomic<bool> has_failure_{false};
  std::mutex failure_mutex_;
  std::string failure_;
  size_t later_failures_ = 0;
};

// Called once by the runtime's initialisation.
mydevError_t create_devices(const Config& config, std::string* error);

int device_count();
// Kernels a device runs at once: its multiProcessorCount.
int kernel_slots();
// mydevErrorInvalidDevice with a message unless 0 <= index < device_count().
mydevError_t get_device(int index, Device** out);
// The device whose arena address range contains `ptr`, or nullptr. O(1).
Device* device_of_address(const void* ptr);
int current_device();

// At exit: stop every executor from starting work and wait (bounded) for
// the work in flight.
void quiesce_devices_for_exit();

}  // namespace mydev_sim
