// Error reporting shared by every API entry: the thread-local "last error"
// message that mydevGetLastErrorMessage returns.
#pragma once

#include <cstdarg>
#include <string>

#include "mydev_runtime.h"

namespace mydev_sim {

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// Records the calling thread's last-error message and returns `code`, so that
// an entry point can `return fail(...)`.
mydevError_t fail(mydevError_t code, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
mydevError_t fail_with(mydevError_t code, std::string message);

void clear_last_error();

}  // namespace mydev_sim
