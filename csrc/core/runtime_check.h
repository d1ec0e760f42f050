// Turns driver error codes into the exceptions PyTorch users expect.
#pragma once

#include <c10/util/Exception.h>

#include "../runtime/mydev_runtime.h"

namespace mydev {

// Out-of-memory becomes torch.OutOfMemoryError (a RuntimeError subclass, as on
// CUDA); everything else a RuntimeError carrying the driver's detailed message.
[[noreturn]] void throwRuntimeError(mydevError_t error, const char* expr,
                                    const char* file, int line);

}  // namespace mydev

#define MYDEV_CHECK(expr)                                                      \
  do {                                                                         \
    const mydevError_t mydev_check_err_ = (expr);                              \
    if (C10_UNLIKELY(mydev_check_err_ != mydevSuccess)) {                      \
      ::mydev::throwRuntimeError(mydev_check_err_, #expr, __FILE__, __LINE__); \
    }                                                                          \
  } while (0)
