// PrivateUse1HooksInterface: how ATen asks the backend for generators,
// pinned memory, pointer ownership and storage resizing.
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/StorageImpl.h>

#include <algorithm>

#include "caching_allocator.h"
#include "device.h"
#include "generator.h"
#include "host_allocator.h"
#include "mydev_stream.h"
#include "runtime_check.h"

namespace mydev {
namespace {

struct MydevHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }

  bool isAvailable() const override { return deviceCount() > 0; }

  void init() const override {
    int count = 0;
    MYDEV_CHECK(mydevGetDeviceCount(&count));
  }

  c10::DeviceIndex deviceCount() const override { return mydev::deviceCount(); }

  void setCurrentDevice(c10::DeviceIndex device) const override {
    checkDeviceIndex(device);
    MYDEV_CHECK(mydevSetDevice(device));
  }

  c10::DeviceIndex getCurrentDevice() const override { return currentDevice(); }

  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    const c10::DeviceIndex previous = currentDevice();
    if (device >= 0 && device != previous) {
      setCurrentDevice(device);
    }
    return previous;
  }

  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return exchangeDevice(device);
  }

  bool hasPrimaryContext(c10::DeviceIndex device) const override {
    // A simulated device has no separately created context: it is usable as
    // soon as the runtime is up and the index is valid.
    return mydevIsInitialized() != 0 && device >= 0 && device < deviceCount();
  }

  const at::Generator& getDefaultGenerator(
      c10::DeviceIndex device) const override {
    return defaultGenerator(device);
  }

  at::Generator getNewGenerator(c10::DeviceIndex device) const override {
    return newGenerator(device);
  }

  at::Device getDeviceFromPtr(void* data) const override {
    mydevPointerAttributes attributes{};
    MYDEV_CHECK(mydevPointerGetAttributes(&attributes, data));
    TORCH_CHECK(attributes.type == mydevMemoryTypeDevice, "pointer ", data,
                " is not ", kDeviceName, " device memory");
    return {c10::DeviceType::PrivateUse1,
            static_cast<c10::DeviceIndex>(attributes.device)};
  }

  bool isPinnedPtr(const void* data) const override {
    return isPinnedPointer(data);
  }

  at::Allocator* getPinnedMemoryAllocator() const override {
    return &hostAllocator();
  }

  // Storage.resize_() lands here; FSDP2 frees and regrows parameter storage
  // this way. The old bytes that still fit are kept, in stream order.
  void resizePrivateUse1Bytes(const c10::Storage& storage,
                              size_t new_bytes) const override {
    c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
    // Python's negative sizes arrive here wrapped around to huge values.
    TORCH_CHECK(static_cast<int64_t>(new_bytes) >= 0, "Trying to resize a ",
                kDeviceName, " storage to a negative size (",
                static_cast<int64_t>(new_bytes), " bytes)");
    TORCH_CHECK(impl->resizable(),
                "Trying to resize storage that is not resizable");
    const size_t old_bytes = impl->nbytes();
    if (new_bytes == old_bytes) {
      return;
    }
    const c10::DeviceGuard guard(impl->device());
    c10::DataPtr data = cachingAllocator().allocate(new_bytes);
    const size_t keep = std::min(old_bytes, new_bytes);
    if (keep > 0) {
      MYDEV_CHECK(mydevMemcpyAsync(data.get(), impl->data(), keep,
                                   mydevMemcpyDeviceToDevice,
                                   getCurrentStream().raw()));
    }
    impl->set_data_ptr_noswap(std::move(data));
    impl->set_nbytes(new_bytes);
  }
};

struct RegisterHooks {
  RegisterHooks() {
    static MydevHooks hooks;
    at::RegisterPrivateUse1HooksInterface(&hooks);
  }
} register_hooks;

}  // namespace
}  // namespace mydev
