// Routes ATen's structured ops straight to the device-kernel path instead of
// their generic host-side kernel (why: structured_op_routing.cpp).
#pragma once

namespace mydev {

// Registers the routes, once; called when the Python extension loads, after
// the library's own kernels are registered.
void routeStructuredOpsToDeviceKernelPath();

}  // namespace mydev
