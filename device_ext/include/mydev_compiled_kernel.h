// The contract between device_ext._C and the kernel modules torch.compile
// builds for mydev (inductor_backend). A kernel module includes this header,
// takes the function table below from the capsule that device_ext._C
// exports, and launches its kernels through it on a mydev stream.
//
// The table is versioned so that a kernel module cached on disk by an older
// build fails to load with a clear message instead of calling into a layout
// it does not know. On real hardware the table stays; what changes is that
// `launch` submits device code instead of a host function.
#pragma once

#include <stdint.h>

#define MYDEV_COMPILED_KERNEL_ABI_VERSION 1
#define MYDEV_COMPILED_KERNEL_ABI_CAPSULE "device_ext._C._compiled_kernel_abi"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct _object PyObject;
typedef void (*MydevKernelBody)(void* payload);

typedef struct MydevCompiledKernelAbi {
  int version;
  // The device address of a mydev tensor's data; NULL, with a message in
  // last_error(), when `tensor` is not a tensor on mydev. `kernel` and
  // `argument` only name the culprit in that message.
  void* (*tensor_data_ptr)(PyObject* tensor, const char* kernel, int argument);
  // The calling thread's current stream on `device` (-1: current device);
  // NULL, with a message in last_error(), for a device that does not exist.
  void* (*current_stream)(int device);
  // Makes `device` current on the calling thread and returns the previous
  // current device; -1, with a message in last_error(), if it does not exist.
  int (*exchange_device)(int device);
  // Enqueues run(payload) on `stream`, after the work already queued there.
  // run takes ownership of payload. If the kernel cannot be queued, discard
  // (payload) is called instead. Returns 0, or nonzero with the reason in
  // last_error(). `name` must outlive the kernel: errors quote it.
  int (*launch)(void* stream, const char* name, MydevKernelBody run,
                MydevKernelBody discard, void* payload);
  // The message of this thread's last failed call above.
  const char* (*last_error)(void);
} MydevCompiledKernelAbi;

#ifdef __cplusplus
}  // extern "C"

#include <memory>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace mydev_compiled {

// Set once per kernel module by load_abi() while the module is imported.
inline const MydevCompiledKernelAbi* abi = nullptr;

// SYCL-style submission: `body` (a lambda capturing its arguments by value)
// runs on the stream's executor once the work queued before it is done.
template <typename Body>
void launch(void* stream, const char* name, Body&& body) {
  using Stored = std::decay_t<Body>;
  auto owned = std::make_unique<Stored>(std::forward<Body>(body));
  const MydevKernelBody run = [](void* payload) {
    std::unique_ptr<Stored> kernel(static_cast<Stored*>(payload));
    (*kernel)();
  };
  const MydevKernelBody discard = [](void* payload) {
    delete static_cast<Stored*>(payload);
  };
  if (abi->launch(stream, name, run, discard, owned.release()) != 0) {
    throw std::runtime_error(abi->last_error());
  }
}

// Makes a device current for a scope (the C++ wrapper's device guard).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) : previous_(exchange(device)) {}
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  ~DeviceGuard() { abi->exchange_device(previous_); }
  void set_index(int device) { exchange(device); }

 private:
  static int exchange(int device) {
    const int previous = abi->exchange_device(device);
    if (previous < 0) {
      throw std::runtime_error(abi->last_error());
    }
    return previous;
  }
  int previous_;
};

// The current stream of `device` on this thread.
inline void* current_stream(int device) {
  void* stream = abi->current_stream(device);
  if (stream == nullptr) {
    throw std::runtime_error(abi->last_error());
  }
  return stream;
}

}  // namespace mydev_compiled

// Kernel modules are Python extension modules; this part needs Python.h.
#ifdef PY_VERSION_HEX
namespace mydev_compiled {

// Call from the module's PyInit (GIL held). Returns false with a Python
// error set if device_ext._C is missing or of another ABI version.
inline bool load_abi() {
  const auto* table = static_cast<const MydevCompiledKernelAbi*>(
      PyCapsule_Import(MYDEV_COMPILED_KERNEL_ABI_CAPSULE, 0));
  if (table == nullptr) {
    return false;
  }
  if (table->version != MYDEV_COMPILED_KERNEL_ABI_VERSION) {
    PyErr_Format(PyExc_ImportError,
                 "mydev compiled kernel built for kernel ABI %d, but "
                 "device_ext._C provides %d; clear the Inductor cache "
                 "(TORCHINDUCTOR_CACHE_DIR) and compile again",
                 MYDEV_COMPILED_KERNEL_ABI_VERSION, table->version);
    return false;
  }
  abi = table;
  return true;
}

}  // namespace mydev_compiled
#endif  // PY_VERSION_HEX
#endif  // __cplusplus
