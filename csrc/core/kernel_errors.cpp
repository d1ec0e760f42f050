#include "kernel_errors.h"

#include <array>
#include <mutex>

#include "device.h"
#include "mydev_stream.h"

namespace mydev {
namespace {

struct KeptFailure {
  std::exception_ptr error;
  std::string message;
};

std::mutex kept_mutex;
std::array<KeptFailure, kMaxDevices> kept;

}  // namespace

void recordKernelException(c10::DeviceIndex device, std::exception_ptr error,
                           std::string message) {
  std::lock_guard<std::mutex> lock(kept_mutex);
  KeptFailure& slot = kept[device];
  if (!slot.error) {
    slot = KeptFailure{std::move(error), std::move(message)};
  }
}

std::exception_ptr takeKernelException(const std::string& driver_message) {
  std::lock_guard<std::mutex> lock(kept_mutex);
  // The driver quotes the kernel's message; matching it (rather than trusting
  // order) keeps a failure from being paired with another device's report.
  for (KeptFailure& slot : kept) {
    if (slot.error && driver_message.find(slot.message) != std::string::npos) {
      return std::exchange(slot, KeptFailure{}).error;
    }
  }
  return nullptr;
}

}  // namespace mydev
