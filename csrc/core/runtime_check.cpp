#include "runtime_check.h"

#include "device.h"
#include "kernel_errors.h"

#include <string>

namespace mydev {

void throwRuntimeError(mydevError_t error, const char* expr, const char* file,
                       int line) {
  std::string detail = mydevGetLastErrorMessage();
  if (detail.empty()) {
    detail = mydevGetErrorString(error);
  }
  // The call site is for vendor debugging; users read the driver's message.
  const std::string where = std::string(" (") + expr + " at " + file + ":" +
                            std::to_string(line) + ")";
  if (error == mydevErrorMemoryAllocation) {
    TORCH_CHECK_WITH(OutOfMemoryError, false, detail);
  }
  if (error == mydevErrorLaunchFailure) {
    if (std::exception_ptr original = takeKernelException(detail)) {
      try {
        std::rethrow_exception(original);
      } catch (c10::Error& kernel_error) {
        // Under launch blocking the kernel ran inside the launching call.
        kernel_error.add_context(
            mydevLaunchBlocking()
                ? c10::str("raised by a ", kDeviceName,
                           " kernel, reported at its launch "
                           "(MYDEV_LAUNCH_BLOCKING=1): ",
                           detail)
                : c10::str("raised asynchronously by a ", kDeviceName,
                           " kernel and reported at this synchronizing "
                           "call: ",
                           detail));
        throw;
      }
    }
  }
  TORCH_CHECK(false, kDeviceName, " error: ", detail, where);
}

}  // namespace mydev
