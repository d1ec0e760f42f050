#include "triton_launch_bindings.h"

#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_set>

#include "../core/host_code_in_stream_order.h"
#include "../core/kernel_errors.h"
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

bool streamIsCapturing(uintptr_t handle) {
  mydevStreamCaptureStatus status = mydevStreamCaptureStatusNone;
  MYDEV_CHECK(
      mydevStreamGetCaptureInfo(launchStream(handle), &status, nullptr));
  return status != mydevStreamCaptureStatusNone;
}

bool interpreterIsExiting() {
  return !Py_IsInitialized() || _Py_IsFinalizing() != 0;
}

// A kernel whose body is Python, run by the stream's executor. Its data is
// owned by the driver (mydevLaunchKernelEx), so a graph can capture it and
// run it at every replay; the body keeps what it computes with (its
// arguments, tensors included) alive until the driver releases it.
struct PythonKernel {
  py::object body;
  c10::DeviceIndex device;
};

void runPythonKernel(void* user_data) {
  auto* kernel = static_cast<PythonKernel*>(user_data);
  if (interpreterIsExiting()) {
    throw std::runtime_error("the Python interpreter is exiting");
  }
  py::gil_scoped_acquire gil;
  try {
    kernel->body();
  } catch (py::error_already_set& error) {
    // Kept so that the synchronizing call that reports the failure raises
    // the kernel's own exception type (TritonKernelError).
    const std::string message = error.what();
    recordKernelException(kernel->device, std::current_exception(), message);
    throw std::runtime_error(message);
  }
}

void releasePythonKernel(void* user_data) {
  std::unique_ptr<PythonKernel> kernel(static_cast<PythonKernel*>(user_data));
  if (interpreterIsExiting()) {
    kernel->body.release();  // Python objects cannot be freed any more
    return;
  }
  py::gil_scoped_acquire gil;
  kernel.reset();
}

void launchPythonKernel(uintptr_t stream_handle, const std::string& name,
                        py::function body) {
  const mydevStream_t stream = launchStream(stream_handle);
  auto kernel = std::make_unique<PythonKernel>(
      PythonKernel{std::move(body),
                   static_cast<c10::DeviceIndex>(streamDevice(stream_handle))});
  const char* kernel_name = internKernelName(name);
  mydevError_t status = mydevSuccess;
  {
    // With launch blocking the launch waits for the kernel, which needs
    // the GIL.
    py::gil_scoped_release no_gil;
    status = mydevLaunchKernelEx(stream, kernel_name, &runPythonKernel,
                                 &releasePythonKernel, kernel.get());
  }
  if (status == mydevSuccess || status == mydevErrorLaunchFailure) {
    // The driver owns the kernel (with launch blocking a failed kernel ran
    // and was released already).
    (void)kernel.release();
  }
  MYDEV_CHECK(status);
}

}  // namespace

void bindTritonLaunch(py::module& module) {
  module.def("_stream_device", &streamDevice, py::arg("stream"),
             "The device index of a stream given by its driver handle.");
  module.def("_run_in_stream_order", &runInStreamOrder, py::arg("stream"),
             py::arg("name"), py::arg("body"),
             "Calls body() on this thread at this point of the stream's order "
             "(the stream waits for it as for a kernel named `name`).");
  module.def("_stream_is_capturing", &streamIsCapturing, py::arg("stream"),
             "Whether the stream (a driver handle) records into a graph.");
  module.def("_launch_python_kernel", &launchPythonKernel, py::arg("stream"),
             py::arg("name"), py::arg("body"),
             "Enqueues body() as a kernel named `name` that the stream's "
             "executor runs (holding the GIL); a capturing stream records it "
             "into its graph, which runs it at every replay.");
}

}  // namespace mydev
