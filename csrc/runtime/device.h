// The device table: per device its memory (created on first malloc), kernel
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

class DeviceMemory;
class Stream;

class Device {
 public:
  Device(int index, size_t capacity, char* slot_base, size_t slot_size,
         int kernel_slots);
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  int index() const { return index_; }
  size_t capacity() const { return capacity_; }
  KernelGate& gate() { return gate_; }

  // Creates the memory on first use, so unused devices cost nothing.
  mydevError_t memory(DeviceMemory** out);
  // nullptr until the first allocation on the device.
  DeviceMemory* existing_memory() const {
    return memory_.load(std::memory_order_acquire);
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
  // An illegal address touched by enqueued work: as on CUDA, the device's
  // state is then unknown, so the error is sticky: every later report
  // returns it, until the process exits.
  void record_illegal_address(std::string message);
  // mydevErrorLaunchFailure with the recorded message (and clears it),
  // mydevErrorIllegalAddress (kept), or success if nothing failed since the
  // last report.
  mydevError_t report_failure();

 private:
  const int index_;
  const size_t capacity_;
  char* const slot_base_;
  const size_t slot_size_;
  KernelGate gate_;

  std::mutex memory_mutex_;
  std::atomic<DeviceMemory*> memory_{nullptr};

  std::mutex default_stream_mutex_;
  std::atomic<Stream*> default_stream_{nullptr};

  std::mutex streams_mutex_;
  std::vector<Stream*> streams_;

  std::atomic<bool> has_failure_{false};
  std::mutex failure_mutex_;
  std::string failure_;
  size_t later_failures_ = 0;
  bool sticky_ = false;  // failure_ is an illegal address
};

// Called once by the runtime's initialisation.
mydevError_t create_devices(const Config& config, std::string* error);

int device_count();
// Kernels a device runs at once: its multiProcessorCount.
int kernel_slots();
// mydevErrorInvalidDevice with a message unless 0 <= index < device_count().
mydevError_t get_device(int index, Device** out);
// The device whose slot of device addresses contains `ptr`, or nullptr. O(1).
Device* device_of_address(const void* ptr);
int current_device();

// At exit: stop every executor from starting work and wait (bounded) for
// the work in flight.
void quiesce_devices_for_exit();

}  // namespace mydev_sim
