#include "device.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "address_space.h"
#include "align.h"
#include "capture.h"
#include "device_memory.h"
#include "error.h"
#include "ipc.h"
#include "lifecycle.h"
#include "stream.h"

namespace mydev_sim {
namespace {

// How long exit waits for kernels already running before it lets static
// destruction proceed anyway: a stuck kernel must not hang the process.
constexpr std::chrono::seconds kExitGrace{2};

// Each device's slot of device addresses is this many times its capacity:
// every allocation takes fresh addresses, so fragmentation of the addresses
// must stay harmless long after fragmentation of the memory would not.
constexpr size_t kAddressesPerByte = 8;

struct DeviceTable {
  std::vector<Device*> devices;
  // The device slots of the address space, so finding the owner of a
  // pointer is a subtraction and a division.
  char* base = nullptr;
  size_t slot_size = 0;
};

// Never freed: see InitResult in lifecycle.cpp.
DeviceTable* g_table = nullptr;

thread_local int t_current_device = 0;

}  // namespace

Device::Device(int index, size_t capacity, char* slot_base, size_t slot_size,
               int kernel_slots)
    : index_(index),
      capacity_(capacity),
      slot_base_(slot_base),
      slot_size_(slot_size),
      gate_(kernel_slots) {}

mydevError_t Device::memory(DeviceMemory** out) {
  DeviceMemory* memory = memory_.load(std::memory_order_acquire);
  if (memory == nullptr) {
    std::lock_guard<std::mutex> lock(memory_mutex_);
    memory = memory_.load(std::memory_order_relaxed);
    if (memory == nullptr) {
      if (mydevError_t status = DeviceMemory::create(
              index_, slot_base_, slot_size_, capacity_, &memory)) {
        return status;
      }
      memory_.store(memory, std::memory_order_release);
    }
  }
  *out = memory;
  return mydevSuccess;
}

mydevError_t Device::default_stream(Stream** out) {
  Stream* stream = default_stream_.load(std::memory_order_acquire);
  if (stream == nullptr) {
    std::lock_guard<std::mutex> lock(default_stream_mutex_);
    stream = default_stream_.load(std::memory_order_relaxed);
    if (stream == nullptr) {
      if (mydevError_t status = Stream::create(this, /*priority=*/0,
                                               /*is_default=*/true, &stream)) {
        return status;
      }
      default_stream_.store(stream, std::memory_order_release);
    }
  }
  *out = stream;
  return mydevSuccess;
}

void Device::add_stream(Stream* stream) {
  std::lock_guard<std::mutex> lock(streams_mutex_);
  streams_.push_back(stream);
}

void Device::remove_stream(Stream* stream) {
  std::lock_guard<std::mutex> lock(streams_mutex_);
  streams_.erase(std::remove(streams_.begin(), streams_.end(), stream),
                 streams_.end());
}

std::vector<Stream*> Device::retain_streams() {
  std::lock_guard<std::mutex> lock(streams_mutex_);
  for (Stream* stream : streams_) stream->retain();
  return streams_;
}

void Device::record_failure(std::string message) {
  std::lock_guard<std::mutex> lock(failure_mutex_);
  if (has_failure_.load(std::memory_order_relaxed)) {
    ++later_failures_;
    return;
  }
  failure_ = std::move(message);
  has_failure_.store(true, std::memory_order_release);
}

void Device::record_illegal_address(std::string message) {
  std::lock_guard<std::mutex> lock(failure_mutex_);
  if (sticky_) return;
  sticky_ = true;
  failure_ = std::move(message);
  has_failure_.store(true, std::memory_order_release);
}

mydevError_t Device::report_failure() {
  if (!has_failure_.load(std::memory_order_acquire)) return mydevSuccess;
  std::string message;
  {
    std::lock_guard<std::mutex> lock(failure_mutex_);
    if (!has_failure_.load(std::memory_order_relaxed)) return mydevSuccess;
    if (sticky_) return fail_with(mydevErrorIllegalAddress, failure_);
    message = std::move(failure_);
    failure_.clear();
    if (later_failures_ > 0) {
      message += format(
          " (and %zu more kernel failure%s on mydev:%d after it, "
          "before this report)",
          later_failures_, later_failures_ == 1 ? "" : "s", index());
      later_failures_ = 0;
    }
    has_failure_.store(false, std::memory_order_relaxed);
  }
  return fail_with(mydevErrorLaunchFailure, std::move(message));
}

mydevError_t create_devices(const Config& config, std::string* error) {
  // Slots are 2 MiB aligned so that device memory could use huge pages.
  constexpr size_t kSlotAlignment = size_t{2} << 20;
  const size_t slot_size =
      round_up(config.memory_bytes * kAddressesPerByte, kSlotAlignment);
  if (mydevError_t status =
          reserve_address_space(config.device_count, slot_size, error)) {
    return status;
  }
  auto* table = new DeviceTable;
  table->slot_size = slot_size;
  table->base = address_space()->device_base;
  // Whole pages: the capacity is what the pages add up to.
  const size_t capacity = round_down(config.memory_bytes, kDevicePageSize);
  for (int i = 0; i < config.device_count; ++i) {
    table->devices.push_back(new Device(
        i, capacity, table->base + slot_size * i, slot_size, kernel_slots()));
  }
  g_table = table;
  return mydevSuccess;
}

int device_count() { return int(g_table->devices.size()); }

int kernel_slots() {
  static const int slots =
      std::max(2, int(std::thread::hardware_concurrency()));
  return slots;
}

mydevError_t get_device(int index, Device** out) {
  if (index < 0 || index >= device_count()) {
    return fail(mydevErrorInvalidDevice,
                "invalid device index mydev:%d: there are %d mydev devices "
                "(MYDEV_DEVICE_COUNT)",
                index, device_count());
  }
  *out = g_table->devices[size_t(index)];
  return mydevSuccess;
}

Device* device_of_address(const void* ptr) {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  const auto base = reinterpret_cast<uintptr_t>(g_table->base);
  if (g_table->devices.empty() || address < base) return nullptr;
  const size_t slot = (address - base) / g_table->slot_size;
  if (slot >= g_table->devices.size()) return nullptr;
  return g_table->devices[slot];
}

int current_device() { return t_current_device; }

void quiesce_devices_for_exit() {
  const auto deadline = std::chrono::steady_clock::now() + kExitGrace;
  std::vector<Stream*> streams;
  for (Device* device : g_table->devices) {
    for (Stream* stream : device->retain_streams()) streams.push_back(stream);
  }
  // Every waiter first, since a stream's task in flight may be waiting for
  // another stream's event.
  for (Stream* stream : streams) stream->wake_waiters_for_exit();
  for (Stream* stream : streams) {
    stream->wait_idle_for_exit(deadline);
    stream->release();
  }
}

}  // namespace mydev_sim

using namespace mydev_sim;

extern "C" {

mydevError_t mydevGetDeviceCount(int* count) {
  if (mydevError_t status = enter_for_query()) return status;
  if (count == nullptr) {
    return fail(mydevErrorInvalidValue, "mydevGetDeviceCount: count is null");
  }
  *count = device_count();
  return mydevSuccess;
}

mydevError_t mydevGetDevice(int* device) {
  if (mydevError_t status = enter()) return status;
  if (device == nullptr) {
    return fail(mydevErrorInvalidValue, "mydevGetDevice: device is null");
  }
  *device = t_current_device;
  return mydevSuccess;
}

mydevError_t mydevSetDevice(int device) {
  if (mydevError_t status = enter()) return status;
  Device* validated = nullptr;
  if (mydevError_t status = get_device(device, &validated)) return status;
  t_current_device = device;
  return mydevSuccess;
}

mydevError_t mydevGetDeviceProperties(mydevDeviceProp* prop, int device) {
  if (mydevError_t status = enter_for_query()) return status;
  if (prop == nullptr) {
    return fail(mydevErrorInvalidValue,
                "mydevGetDeviceProperties: prop is null");
  }
  Device* dev = nullptr;
  if (mydevError_t status = get_device(device, &dev)) return status;
  *prop = mydevDeviceProp{};
  std::strncpy(prop->name, "mydev simulated device", MYDEV_DEVICE_NAME_LEN - 1);
  prop->totalGlobalMem = dev->capacity();
  prop->multiProcessorCount = kernel_slots();
  prop->major = 1;
  prop->minor = 0;
#if defined(__x86_64__) || defined(__i386__)
  prop->simdWidthBytes = __builtin_cpu_supports("avx2") ? 32 : 16;
#else
  prop->simdWidthBytes = 16;
#endif
  // The simulator runs a Triton program as one host task, so any width is
  // correct; 32 is the one Inductor's Triton heuristics were tuned for.
  prop->warpSize = 32;
  prop->maxStreamsPerDevice = 0;
  prop->canMapPeerMemory = peer_memory_supported() ? 1 : 0;
  return mydevSuccess;
}

mydevError_t mydevDeviceGetPendingFailure(int device) {
  if (mydevError_t status = enter()) return status;
  Device* dev = nullptr;
  if (mydevError_t status = get_device(device, &dev)) return status;
  return dev->report_failure();
}

mydevError_t mydevDeviceSynchronize(int device) {
  if (mydevError_t status = enter()) return status;
  Device* dev = nullptr;
  if (mydevError_t status = get_device(device, &dev)) return status;
  if (mydevError_t status = refuse_if_unsafe("mydevDeviceSynchronize")) {
    return status;
  }
  // Each stream is waited for up to what it had when this call started, so
  // work enqueued meanwhile by other threads cannot keep it waiting forever.
  std::vector<Stream*> streams = dev->retain_streams();
  std::vector<uint64_t> targets;
  targets.reserve(streams.size());
  for (Stream* stream : streams) targets.push_back(stream->enqueued());
  for (size_t i = 0; i < streams.size(); ++i) {
    streams[i]->wait(targets[i], /*spin=*/true);
    streams[i]->release();
  }
  return dev->report_failure();
}

}  // extern "C"
