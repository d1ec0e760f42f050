// c10::Stream <-> driver stream handles, in the shape of c10::cuda::CUDAStream.
//
// Stream ids: 0 is the device's default stream; pool streams are numbered
// 1..kStreamsPerPriority for priority 0 and then the same count again for the
// high priority (-1). A c10::Stream thus round-trips through Python
// (torch.Stream stores only id, device index and type).
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include "../runtime/mydev_runtime.h"

namespace mydev {

constexpr int kStreamsPerPriority = 8;

class MydevStream {
 public:
  // Checks that `stream` is a mydev stream with an id from our encoding.
  explicit MydevStream(c10::Stream stream);

  c10::Stream unwrap() const { return stream_; }
  operator c10::Stream() const { return stream_; }
  c10::DeviceIndex device_index() const { return stream_.device_index(); }
  c10::StreamId id() const { return stream_.id(); }
  int priority() const;
  // The driver handle; creates the underlying stream on first use.
  mydevStream_t raw() const;

  bool query() const;
  void synchronize() const;

  bool operator==(const MydevStream& other) const {
    return stream_ == other.stream_;
  }

 private:
  c10::Stream stream_;
};

// `device` -1 means the current device.
MydevStream getCurrentStream(c10::DeviceIndex device = -1);
MydevStream getDefaultStream(c10::DeviceIndex device = -1);
// Round-robin over the device's pool of streams of that priority (0 or -1;
// lower numbers are clamped to -1, higher to 0), as CUDA's stream pool does.
MydevStream getStreamFromPool(int priority, c10::DeviceIndex device = -1);
// Makes `stream` current for its device on the calling thread.
void setCurrentStream(MydevStream stream);
// The id of the torch stream whose driver handle is `handle` (a stream of
// `device`), or -1 for a stream created through the driver directly.
c10::StreamId streamIdOfHandle(c10::DeviceIndex device, mydevStream_t handle);

}  // namespace mydev
