// The contract between the mydev library and the code torch.compile builds
// for mydev (inductor_backend): kernel modules and C++ wrappers include this
// header, take the function table below from the capsule device_ext._C
// exports, and launch kernels through it on mydev streams. AOTInductor
// models (mydev_aoti.h defines MYDEV_COMPILED_KERNEL_ABI_FROM_LOADER) run
// without Python: the library's model loader hands them the table.
//
// The table is versioned so that code cached on disk by an older build fails
// with a clear message instead of calling into a layout it does not know. On
// real hardware the table stays; `launch` then submits device code instead
// of a host function.
#pragma once

#ifndef MYDEV_COMPILED_KERNEL_ABI_FROM_LOADER
#ifndef PY_SSIZE_T_CLEAN
#define PY_SSIZE_T_CLEAN
#endif
#include <Python.h>
#endif
#include <stdint.h>

#define MYDEV_COMPILED_KERNEL_ABI_VERSION 2
#define MYDEV_COMPILED_KERNEL_ABI_CAPSULE "device_ext._C._compiled_kernel_abi"

#ifdef __cplusplus
extern "C" {
#endif

typedef void (*MydevKernelBody)(void* payload);
// An AtenTensorHandle (torch/csrc/inductor/aoti_torch/c/shim.h).
typedef struct AtenTensorOpaque* MydevTensorHandle;
// Python's PyObject (struct _object), named so without Python.h.
typedef struct _object MydevPyObject;

typedef struct MydevCompiledKernelAbi {
  int version;
  // Where a kernel argument's data is. A tensor on the kernel's mydev device:
  // the address the kernel reaches its data at (the driver's
  // mydevKernelPointer of its device address) in *device_pointer, returns 0. A
  // one-element CPU tensor (a Python scalar Inductor passes as a 0-dim tensor):
  // its value copied into host_value (capacity bytes), returns 1; the kernel
  // reads the copy, as the tensor may be freed before the kernel runs. Anything
  // else: -1, with a message naming `kernel` and `argument` in last_error().
  // `device` is the device the kernel runs on: a mydev tensor elsewhere is
  // refused too. NULL in the table AOTInductor models get: they have no
  // Python objects.
  int (*tensor_argument)(MydevPyObject* tensor, const char* kernel,
                         int argument, int device, void** device_pointer,
                         void* host_value, int capacity);
  // The address a kernel reaches device pointer `device_pointer` at
  // (mydevKernelPointer): device pointers themselves are opaque to the host
  // and to kernels alike.
  void* (*kernel_pointer)(void* device_pointer);
  // The device a stream belongs to; -1, with a message in last_error(), for
  // a handle that is not a stream.
  int (*stream_device)(void* stream);
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
  // The message of this thread's last failed call in this table.
  const char* (*last_error)(void);
  // Extern kernels the C++ wrapper calls by name (Inductor's C shims for
  // mydev): ATen ops dispatched to mydev, stream-ordered like every op.
  // Return 0, or nonzero with the reason in last_error().
  int (*mm_out)(MydevTensorHandle out, MydevTensorHandle self,
                MydevTensorHandle mat2);
  int (*addmm_out)(MydevTensorHandle out, MydevTensorHandle self,
                   MydevTensorHandle mat1, MydevTensorHandle mat2, double beta,
                   double alpha);
  int (*bmm_out)(MydevTensorHandle out, MydevTensorHandle self,
                 MydevTensorHandle mat2);
  int (*baddbmm_out)(MydevTensorHandle out, MydevTensorHandle self,
                     MydevTensorHandle batch1, MydevTensorHandle batch2,
                     double beta, double alpha);
  int (*int_mm_out)(MydevTensorHandle out, MydevTensorHandle self,
                    MydevTensorHandle mat2);
  int (*convolution)(MydevTensorHandle input, MydevTensorHandle weight,
                     MydevTensorHandle* bias, const int64_t* stride,
                     int64_t stride_len, const int64_t* padding,
                     int64_t padding_len, const int64_t* dilation,
                     int64_t dilation_len, int32_t transposed,
                     const int64_t* output_padding, int64_t output_padding_len,
                     int64_t groups, MydevTensorHandle* result);
  // Fused attention (csrc/aten/attention.cpp). Undefined results come back
  // as NULL handles.
  int (*attention)(MydevTensorHandle query, MydevTensorHandle key,
                   MydevTensorHandle value, MydevTensorHandle* attn_bias,
                   double dropout_p, int32_t is_causal,
                   int32_t return_debug_mask, double* scale,
                   MydevTensorHandle* output, MydevTensorHandle* logsumexp,
                   MydevTensorHandle* cum_seq_q, MydevTensorHandle* cum_seq_k,
                   int64_t* max_q, int64_t* max_k,
                   MydevTensorHandle* philox_seed,
                   MydevTensorHandle* philox_offset,
                   MydevTensorHandle* debug_attn_mask);
  int (*attention_backward)(
      MydevTensorHandle grad_out, MydevTensorHandle query,
      MydevTensorHandle key, MydevTensorHandle value,
      MydevTensorHandle attn_bias, const int32_t* grad_input_mask,
      int64_t grad_input_mask_len, MydevTensorHandle out,
      MydevTensorHandle logsumexp, MydevTensorHandle cum_seq_q,
      MydevTensorHandle cum_seq_k, int64_t max_q, int64_t max_k,
      double dropout_p, int32_t is_causal, MydevTensorHandle philox_seed,
      MydevTensorHandle philox_offset, double* scale,
      MydevTensorHandle* grad_query, MydevTensorHandle* grad_key,
      MydevTensorHandle* grad_value, MydevTensorHandle* grad_attn_bias);
} MydevCompiledKernelAbi;

#ifdef __cplusplus
}  // extern "C"

#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

namespace mydev_compiled {

#ifdef MYDEV_COMPILED_KERNEL_ABI_FROM_LOADER

// Set once, by the loader, before the model is created (mydev_aoti.h).
inline const MydevCompiledKernelAbi* loader_abi = nullptr;

inline const MydevCompiledKernelAbi& abi() {
  if (loader_abi == nullptr) {
    throw std::runtime_error(
        "this AOTInductor model was compiled for mydev: load it with "
        "torch._inductor.aoti_load_package or "
        "torch::inductor::AOTIModelPackageLoader in a process where the mydev "
        "library is loaded");
  }
  return *loader_abi;
}

#else

// The table, or NULL with a Python error set (ImportError for a table of
// another version). Call with the GIL held.
inline const MydevCompiledKernelAbi* import_abi() {
  const auto* table = static_cast<const MydevCompiledKernelAbi*>(
      PyCapsule_Import(MYDEV_COMPILED_KERNEL_ABI_CAPSULE, 0));
  if (table != nullptr && table->version != MYDEV_COMPILED_KERNEL_ABI_VERSION) {
    PyErr_Format(
        PyExc_ImportError,
        "mydev compiled code built for kernel ABI %d, but device_ext._C "
        "provides %d; clear the Inductor cache (TORCHINDUCTOR_CACHE_DIR) "
        "and compile again",
        MYDEV_COMPILED_KERNEL_ABI_VERSION, table->version);
    return nullptr;
  }
  return table;
}

// The table, imported on first use (from any thread).
inline const MydevCompiledKernelAbi& abi() {
  static const MydevCompiledKernelAbi* const table = [] {
    const PyGILState_STATE gil = PyGILState_Ensure();
    const MydevCompiledKernelAbi* imported = import_abi();
    std::string failure;
    if (imported == nullptr) {
      PyObject *type, *value, *traceback;
      PyErr_Fetch(&type, &value, &traceback);
      PyObject* text = value != nullptr ? PyObject_Str(value) : nullptr;
      const char* utf8 = text != nullptr ? PyUnicode_AsUTF8(text) : nullptr;
      failure = utf8 != nullptr
                    ? utf8
                    : "cannot import " MYDEV_COMPILED_KERNEL_ABI_CAPSULE;
      Py_XDECREF(text);
      Py_XDECREF(type);
      Py_XDECREF(value);
      Py_XDECREF(traceback);
      PyErr_Clear();
    }
    PyGILState_Release(gil);
    if (imported == nullptr) {
      throw std::runtime_error(failure);
    }
    return imported;
  }();
  return *table;
}

#endif  // MYDEV_COMPILED_KERNEL_ABI_FROM_LOADER

inline void check(int status) {
  if (status != 0) {
    throw std::runtime_error(abi().last_error());
  }
}

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
  check(abi().launch(stream, name, run, discard, owned.release()));
}

// A pointer argument of a kernel as captured by its launch: the kernel-side
// address of a tensor's data, or the copy of a host scalar that lives in the
// launch itself.
struct TensorArgument {
  void* device = nullptr;
  bool on_host = false;
  alignas(16) unsigned char host_value[16];

  void* get() const {
    return on_host ? const_cast<unsigned char*>(host_value) : device;
  }
};

// `pointer` is a tensor's data_ptr(), a device address.
inline TensorArgument device_argument(void* pointer) {
  TensorArgument argument;
  argument.device = abi().kernel_pointer(pointer);
  return argument;
}

// The value of a one-element CPU tensor, copied at launch.
inline TensorArgument host_scalar_argument(const void* pointer, size_t size) {
  if (size > sizeof(TensorArgument::host_value)) {
    throw std::invalid_argument("host scalar kernel argument too large");
  }
  TensorArgument argument;
  std::memcpy(argument.host_value, pointer, size);
  argument.on_host = true;
  return argument;
}

// The current stream of `device` on this thread.
inline void* current_stream(int device) {
  void* stream = abi().current_stream(device);
  if (stream == nullptr) {
    throw std::runtime_error(abi().last_error());
  }
  return stream;
}

// Makes a device current for a scope (the C++ wrapper's device guard).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) : previous_(exchange(device)) {}
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  ~DeviceGuard() { abi().exchange_device(previous_); }
  void set_index(int device) { exchange(device); }

 private:
  static int exchange(int device) {
    const int previous = abi().exchange_device(device);
    if (previous < 0) {
      throw std::runtime_error(abi().last_error());
    }
    return previous;
  }
  int previous_;
};

}  // namespace mydev_compiled
#endif  // __cplusplus
