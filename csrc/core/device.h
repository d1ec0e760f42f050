// The mydev devices as torch sees them: the device type's name, how many
// devices there are, which one is current on this thread, index checks.
// Everything here is a thin layer over the driver's device API
// (../runtime/mydev_runtime.h) with torch's error conventions.
#pragma once

#include <c10/core/Device.h>

namespace mydev {

// The name PrivateUse1 is renamed to (device_ext/device_name.py is the
// Python side's one constant; both must agree).
inline constexpr char kDeviceName[] = "mydev";

// Upper bound of MYDEV_DEVICE_COUNT: per-device tables are this long.
constexpr int kMaxDevices = 64;

c10::DeviceIndex currentDevice();
// Never throws (c10's contract for device counts): 0 when the driver cannot
// be initialized.
c10::DeviceIndex deviceCount() noexcept;
// Throws the usual "invalid device" error if `device` is out of range.
void checkDeviceIndex(c10::DeviceIndex device);

}  // namespace mydev
