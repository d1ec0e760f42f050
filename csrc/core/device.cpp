#include "device.h"

#include <c10/core/DeviceType.h>
#include <c10/util/Exception.h>

#include <atomic>

#include "../runtime/mydev_runtime.h"
#include "runtime_check.h"

namespace mydev {
namespace {

// The device's name for c10 ("mydev:1" parses as PrivateUse1 index 1) as
// soon as the library is loaded: a C++ program linking it (an AOTInductor
// runner) never runs device_ext's torch.utils.rename_privateuse1_backend,
// which registers the same name again, as c10 allows.
[[maybe_unused]] const bool name_registered = [] {
  c10::register_privateuse1_backend(kDeviceName);
  return true;
}();

}  // namespace

c10::DeviceIndex currentDevice() {
  int device = 0;
  MYDEV_CHECK(mydevGetDevice(&device));
  return static_cast<c10::DeviceIndex>(device);
}

c10::DeviceIndex deviceCount() noexcept {
  int count = 0;
  // Must not throw (c10 contract): a broken configuration means no devices,
  // said once, as cuda warns when its driver is unusable; code choosing
  // "mydev if available else cpu" must not fall back to the CPU silently.
  if (mydevGetDeviceCount(&count) != mydevSuccess) {
    TORCH_WARN_ONCE(kDeviceName,
                    " initialization: ", mydevGetLastErrorMessage(), ". ",
                    kDeviceName, " is unavailable (torch.", kDeviceName,
                    ".is_available() is False).");
    return 0;
  }
  return static_cast<c10::DeviceIndex>(count);
}

void checkDeviceIndex(c10::DeviceIndex device) {
  // The count is fixed once the driver has initialized (MYDEV_DEVICE_COUNT
  // is read then), and every allocation and launch checks an index: it is
  // asked for once. A failed initialization is asked again, to be reported.
  static std::atomic<int> known_count{-1};
  int count = known_count.load(std::memory_order_relaxed);
  if (count < 0) {
    MYDEV_CHECK(mydevGetDeviceCount(&count));
    known_count.store(count, std::memory_order_relaxed);
  }
  TORCH_CHECK(device >= 0 && device < count, "Invalid device index ",
              kDeviceName, ":", static_cast<int>(device), ": there are ", count,
              " ", kDeviceName,
              " devices (set MYDEV_DEVICE_COUNT to change that)");
}

}  // namespace mydev
