#include "triton_launch_bindings.h"

#include <mutex>
#include <string>
#include <unordered_set>

#include "../core/host_code_in_stream_order.h"
#include "../core/runtime_check.h"

namespace py = pybind11;

namespace mydev {
namespace {

// Driver errors quote kernel names after the launch returned, so they must
// live as long as the process; there are few distinct Triton kernels.
const char* internKernelName(const std::string& name) {
  static std::mutex mutex;
  static std::unordered_set<std::string> names;
  std::lock_guard<std::mutex> lock(mutex);
  return names.insert(name).first->c_str();
}

// Triton passes the driver handle of the current stream; 0 stands for the
// current device's default stream, as everywhere in the driver API.
mydevStream_t launchStream(uintptr_t handle) {
  return reinterpret_cast<mydevStream_t>(handle);
}

int streamDevice(uintptr_t handle) {
  int device = -1;
  MYDEV_CHECK(mydevStreamGetDevice(launchStream(handle), &device));
  return device;
}

void runInStreamOrder(uintptr_t stream_handle, const std::string& name,
                      const py::function& body) {
  const mydevStream_t stream = launchStream(stream_handle);
  const char* kernel_name = internKernelName(name);
  // Waiting for the stream to reach the launch must not hold the GIL: work
  // queued ahead of it may be another thread's Triton launch.
  py::gil_scoped_release no_gil;
  runHostCodeInStreamOrder(stream, kernel_name, [&] {
    py::gil_scoped_acquire gil;
    body();
  });
}

}  // namespace

void bindTritonLaunch(py::module& module) {
  module.def("_stream_device", &streamDevice, py::arg("stream"),
             "The device index of a stream given by its driver handle.");
  module.def("_run_in_stream_order", &runInStreamOrder, py::arg("stream"),
             py::arg("name"), py::arg("body"),
             "Calls body() on this thread at this point of the stream's order "
             "(the stream waits for it as for a kernel named `name`).");
}

}  // namespace mydev
