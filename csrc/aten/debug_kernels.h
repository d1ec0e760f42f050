// Kernels that exist for testing the device itself, like torch.cuda._sleep.
#pragma once

#include <cstdint>

namespace mydev {

// Occupies the current stream for `milliseconds` without blocking the host:
// the way tests prove that launches are asynchronous.
void sleepOnCurrentStream(int64_t milliseconds);

// A kernel that fails with `message`: the way tests prove that device-side
// errors surface at the next synchronizing call.
void failOnCurrentStream(const char* message);

}  // namespace mydev
