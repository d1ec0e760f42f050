// Keeps the exception a failed kernel threw, so that the synchronizing call
// that reports the failure raises it with its original Python type
// (IndexError, NotImplementedError, ...) rather than a generic RuntimeError.
// The driver itself only carries messages; this is the torch side of it.
#pragma once

#include <c10/core/Device.h>

#include <exception>
#include <string>

namespace mydev {

// Called on the executor thread by a kernel that failed; the first failure
// of a device is kept until it is reported.
void recordKernelException(c10::DeviceIndex device, std::exception_ptr error,
                           std::string message);

// If `driver_message` reports the kept failure of some device, returns that
// exception (and forgets it); otherwise nullptr.
std::exception_ptr takeKernelException(const std::string& driver_message);

}  // namespace mydev
