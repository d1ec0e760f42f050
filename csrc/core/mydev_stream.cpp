#include "mydev_stream.h"

#include <array>
#include <atomic>
#include <mutex>

#include "device.h"
#include "runtime_check.h"

namespace mydev {
namespace {

constexpr int kPriorityLevels = 2;  // level 0: priority 0, level 1: priority -1

struct DevicePools {
  // The default stream's handle, asked for by every allocation and launch:
  // the driver creates that stream once and never replaces it, so its
  // handle is fetched once instead of through a driver call each time.
  std::once_flag default_fetched;
  std::atomic<mydevStream_t> default_handle{nullptr};
  std::array<std::array<std::once_flag, kStreamsPerPriority>, kPriorityLevels>
      created;
  // Atomic: streamIdOfHandle reads them while other threads create streams.
  std::array<std::array<std::atomic<mydevStream_t>, kStreamsPerPriority>,
             kPriorityLevels>
      handles{};
  std::array<std::atomic<uint32_t>, kPriorityLevels> next{};
};

DevicePools& poolsFor(c10::DeviceIndex device) {
  // Leaked on purpose: streams must outlive every static destructor that
  // might still synchronize at exit.
  static auto* pools = new std::array<DevicePools, kMaxDevices>();
  return (*pools)[device];
}

// Current stream id per device for this thread; 0 (the default stream) until
// set, which is what CUDA does too.
thread_local std::array<c10::StreamId, kMaxDevices> current_stream_ids{};

int levelOfPriority(int priority) { return priority < 0 ? 1 : 0; }

c10::StreamId poolStreamId(int level, int index) {
  return 1 + level * kStreamsPerPriority + index;
}

c10::Stream makeStream(c10::DeviceIndex device, c10::StreamId id) {
  return c10::Stream(c10::Stream::UNSAFE,
                     c10::Device(c10::DeviceType::PrivateUse1, device), id);
}

c10::DeviceIndex resolveDevice(c10::DeviceIndex device) {
  if (device < 0) {
    return currentDevice();
  }
  checkDeviceIndex(device);
  return device;
}

}  // namespace

MydevStream::MydevStream(c10::Stream stream) : stream_(stream) {
  TORCH_CHECK(stream.device_type() == c10::DeviceType::PrivateUse1,
              "expected a ", kDeviceName, " stream, got a stream on ",
              stream.device());
  TORCH_CHECK(
      stream.id() >= 0 && stream.id() <= kPriorityLevels * kStreamsPerPriority,
      "invalid ", kDeviceName, " stream id ", stream.id());
}

int MydevStream::priority() const {
  if (stream_.id() == 0) {
    return 0;
  }
  const int level = static_cast<int>((stream_.id() - 1) / kStreamsPerPriority);
  return level == 1 ? -1 : 0;
}

mydevStream_t MydevStream::raw() const {
  const c10::DeviceIndex device = stream_.device_index();
  checkDeviceIndex(device);  // the pools are indexed by it
  DevicePools& pools = poolsFor(device);
  if (stream_.id() == 0) {
    std::call_once(pools.default_fetched, [&] {
      mydevStream_t handle = nullptr;
      MYDEV_CHECK(mydevStreamGetDefault(device, &handle));
      pools.default_handle.store(handle, std::memory_order_release);
    });
    return pools.default_handle.load(std::memory_order_acquire);
  }
  const int level = static_cast<int>((stream_.id() - 1) / kStreamsPerPriority);
  const int index = static_cast<int>((stream_.id() - 1) % kStreamsPerPriority);
  std::call_once(pools.created[level][index], [&] {
    mydevStream_t created = nullptr;
    MYDEV_CHECK(mydevStreamCreate(&created, device, level == 1 ? -1 : 0));
    pools.handles[level][index].store(created, std::memory_order_release);
  });
  return pools.handles[level][index].load(std::memory_order_acquire);
}

bool MydevStream::query() const {
  const mydevError_t status = mydevStreamQuery(raw());
  if (status == mydevErrorNotReady) {
    return false;
  }
  MYDEV_CHECK(status);
  return true;
}

void MydevStream::synchronize() const {
  MYDEV_CHECK(mydevStreamSynchronize(raw()));
}

MydevStream getCurrentStream(c10::DeviceIndex device) {
  device = resolveDevice(device);
  return MydevStream(makeStream(device, current_stream_ids[device]));
}

MydevStream getDefaultStream(c10::DeviceIndex device) {
  return MydevStream(makeStream(resolveDevice(device), 0));
}

MydevStream getStreamFromPool(int priority, c10::DeviceIndex device) {
  device = resolveDevice(device);
  const int level = levelOfPriority(priority);
  const uint32_t index =
      poolsFor(device).next[level].fetch_add(1, std::memory_order_relaxed) %
      kStreamsPerPriority;
  return MydevStream(
      makeStream(device, poolStreamId(level, static_cast<int>(index))));
}

c10::StreamId streamIdOfHandle(c10::DeviceIndex device, mydevStream_t handle) {
  const DevicePools& pools = poolsFor(device);
  for (int level = 0; level < kPriorityLevels; ++level) {
    for (int index = 0; index < kStreamsPerPriority; ++index) {
      if (pools.handles[level][index].load(std::memory_order_acquire) ==
          handle) {
        return poolStreamId(level, index);
      }
    }
  }
  mydevStream_t default_handle = nullptr;
  MYDEV_CHECK(mydevStreamGetDefault(device, &default_handle));
  return handle == default_handle ? 0 : -1;
}

void setCurrentStream(MydevStream stream) {
  checkDeviceIndex(stream.device_index());
  current_stream_ids[stream.device_index()] = stream.id();
}

}  // namespace mydev
