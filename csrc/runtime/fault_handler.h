// What a fault on a device address means (address_space.h):
//  * in the kernel half or the null window, it is enqueued work touching an
//    address that no device memory maps: the handler maps a scratch page
//    there, so the access completes with garbage instead of killing the
//    process, and records the address; the executor that ran the work then
//    makes it the device's sticky mydevErrorIllegalAddress, naming the work.
//    (Returning and letting the access retry, rather than jumping out of
//    the kernel, is what keeps the kernel's own threads consistent.)
//  * in the device half, it is the host dereferencing a device pointer: the
//    handler prints the address, the device and the offset, and the process
//    dies of the fault as it would without the handler.
// Any other fault goes to the handler that was installed before (Python's
// faulthandler, for instance), or to the default action.
#pragma once

#include <atomic>

namespace mydev_sim {

class Device;

// Once, when the address space is reserved.
void install_fault_handler();

extern std::atomic<bool> g_illegal_access_pending;
void take_illegal_access(Device* device, const char* work);

// After enqueued work named `work` ran for `device`: turns an illegal access
// recorded meanwhile into the device's sticky error. Costs one load when
// nothing faulted.
inline void report_illegal_access(Device* device, const char* work) {
  if (g_illegal_access_pending.load(std::memory_order_acquire)) {
    take_illegal_access(device, work);
  }
}

}  // namespace mydev_sim
