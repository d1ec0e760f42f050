// DeviceGuardImplInterface for mydev: what torch.Stream, torch.Event,
// torch.accelerator, device guards and the autograd engine call into.
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "caching_allocator.h"
#include "device.h"
#include "mydev_stream.h"
#include "runtime_check.h"

namespace mydev {
namespace {

c10::Device mydevDevice(c10::DeviceIndex index) {
  return c10::Device(c10::DeviceType::PrivateUse1, index);
}

mydevEvent_t asEvent(void* event) { return static_cast<mydevEvent_t>(event); }

struct MydevGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return c10::DeviceType::PrivateUse1; }

  c10::Device exchangeDevice(c10::Device device) const override {
    const c10::Device previous = getDevice();
    if (previous.index() != device.index()) {
      setDevice(device);
    }
    return previous;
  }

  c10::Device getDevice() const override {
    return mydevDevice(currentDevice());
  }

  void setDevice(c10::Device device) const override {
    TORCH_CHECK(device.type() == c10::DeviceType::PrivateUse1, "expected a ",
                kDeviceName, " device, got ", device);
    checkDeviceIndex(device.index());
    MYDEV_CHECK(mydevSetDevice(device.index()));
  }

  void uncheckedSetDevice(c10::Device device) const noexcept override {
    (void)mydevSetDevice(device.index());
  }

  c10::Stream getStream(c10::Device device) const override {
    return getCurrentStream(device.index()).unwrap();
  }

  c10::Stream getDefaultStream(c10::Device device) const override {
    return mydev::getDefaultStream(device.index()).unwrap();
  }

  c10::Stream getStreamFromGlobalPool(c10::Device device,
                                      bool isHighPriority) const override {
    return getStreamFromPool(isHighPriority ? -1 : 0, device.index()).unwrap();
  }

  c10::Stream getNewStream(c10::Device device, int priority) const override {
    return getStreamFromPool(priority, device.index()).unwrap();
  }

  c10::Stream exchangeStream(c10::Stream stream) const override {
    const MydevStream next(stream);
    const MydevStream previous = getCurrentStream(next.device_index());
    setCurrentStream(next);
    return previous.unwrap();
  }

  void* getStreamNativeHandle(const c10::Stream stream) const override {
    return MydevStream(stream).raw();
  }

  void destroyEvent(void* event,
                    const c10::DeviceIndex) const noexcept override {
    if (event != nullptr) {
      (void)mydevEventDestroy(asEvent(event));
    }
  }

  void record(void** event, const c10::Stream& stream,
              const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(),
                "Event device index ", static_cast<int>(device_index),
                " does not match recording stream's device index ",
                static_cast<int>(stream.device_index()), ".");
    if (*event == nullptr) {
      mydevEvent_t created = nullptr;
      const unsigned flags = flag == c10::EventFlag::BACKEND_DEFAULT
                                 ? mydevEventDefault
                                 : mydevEventDisableTiming;
      MYDEV_CHECK(mydevEventCreate(&created, flags));
      *event = created;
    }
    MYDEV_CHECK(mydevEventRecord(asEvent(*event), MydevStream(stream).raw()));
  }

  void block(void* event, const c10::Stream& stream) const override {
    if (event == nullptr) {
      return;  // never recorded: nothing to wait for, as on CUDA
    }
    MYDEV_CHECK(
        mydevStreamWaitEvent(MydevStream(stream).raw(), asEvent(event)));
  }

  bool queryEvent(void* event) const override {
    if (event == nullptr) {
      return true;
    }
    const mydevError_t status = mydevEventQuery(asEvent(event));
    if (status == mydevErrorNotReady) {
      return false;
    }
    MYDEV_CHECK(status);
    return true;
  }

  c10::DeviceIndex deviceCount() const noexcept override {
    return mydev::deviceCount();
  }

  c10::DeviceCapability getDeviceCapability(c10::Device) const override {
    // Kernels are ATen's CPU kernels, so every scalar type is supported.
    return c10::DeviceCapability();
  }

  bool queryStream(const c10::Stream& stream) const override {
    return MydevStream(stream).query();
  }

  void synchronizeStream(const c10::Stream& stream) const override {
    MydevStream(stream).synchronize();
  }

  void synchronizeEvent(void* event) const override {
    if (event != nullptr) {
      MYDEV_CHECK(mydevEventSynchronize(asEvent(event)));
    }
  }

  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    const c10::DeviceIndex device =
        device_index < 0 ? currentDevice() : device_index;
    checkDeviceIndex(device);
    MYDEV_CHECK(mydevDeviceSynchronize(device));
  }

  void recordDataPtrOnStream(const c10::DataPtr& data_ptr,
                             const c10::Stream& stream) const override {
    cachingAllocator().recordStream(data_ptr, stream);
  }

  double elapsedTime(void* start, void* end,
                     const c10::DeviceIndex) const override {
    TORCH_CHECK(
        start != nullptr && end != nullptr,
        "Both events must be recorded before calculating elapsed time.");
    float ms = 0.0f;
    MYDEV_CHECK(mydevEventElapsedTime(&ms, asEvent(start), asEvent(end)));
    return ms;
  }
};

}  // namespace

C10_REGISTER_GUARD_IMPL(PrivateUse1, MydevGuardImpl);

}  // namespace mydev
