// What an AOTInductor model compiled for mydev (model.so in a .pt2 package)
// includes. torch's model runtime (aoti_runtime/model_base.h) knows the
// devices cpu, cuda, xpu and mps only: any other device compiles as a CPU
// model, whose weights are copied into host memory. inductor_backend's
// wrapper (cpp_wrapper.py) therefore adds three things to the generated
// model, all defined here:
//  - the device string: the base class is handed "cpu" so that it accepts the
//    model, then the constructor makes it a mydev model on the device the
//    loader asked for (a package for mydev refuses any other device type);
//  - the weights: copied from the package to the device by the constructor,
//    through the dispatcher (the container's own loader would place them in
//    host memory, which mydev tensors never point to);
//  - the launch table of mydev_compiled_kernel.h, handed over by mydev's
//    model loader (csrc/core/aoti_model_runner.cpp) before the model is
//    created, so the model needs neither Python nor a link to the library.
#pragma once

#define MYDEV_COMPILED_KERNEL_ABI_FROM_LOADER

#include <torch/csrc/inductor/aoti_include/cpu.h>
#include <torch/csrc/inductor/aoti_torch/c/shim.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

// Everything of ours stays inside the model library: JIT-compiled wrappers
// define the same inline names (abi() reading the capsule instead), and a
// default-visibility inline variable would be one object shared by every
// model in the process (STB_GNU_UNIQUE).
#pragma GCC visibility push(hidden)

#include "mydev_c_shims.h"

// The loader calls this with its table before creating the model. Returns
// the table version the model was compiled for; the table is taken only if
// it is the loader's version.
extern "C" __attribute__((visibility("default"), used)) inline int
mydev_aoti_bind_kernel_abi(const MydevCompiledKernelAbi* table) {
  if (table != nullptr && table->version == MYDEV_COMPILED_KERNEL_ABI_VERSION) {
    mydev_compiled::loader_abi = table;
  }
  return MYDEV_COMPILED_KERNEL_ABI_VERSION;
}

namespace mydev_compiled {

// csrc/core/device.h's kDeviceName: the name the loader's device strings use.
inline constexpr char kAotiDeviceName[] = "mydev";

// The device index in "mydev" / "mydev:N" (-1 for none); anything else is
// another device type, which this model cannot run on.
inline int aoti_device_index(const std::string& device_str) {
  const std::string name(kAotiDeviceName);
  if (device_str == name) {
    return -1;
  }
  if (device_str.size() > name.size() + 1 &&
      device_str.compare(0, name.size() + 1, name + ":") == 0 &&
      device_str.find_first_not_of("0123456789", name.size() + 1) ==
          std::string::npos) {
    return std::stoi(device_str.substr(name.size() + 1));
  }
  throw std::runtime_error("this AOTInductor model was compiled for " + name +
                           " and cannot run on device '" + device_str + "'");
}

// What the model base class is handed instead of the mydev device string
// (it rejects device types it does not know); checked first.
inline std::string aoti_base_device_str(const std::string& device_str) {
  aoti_device_index(device_str);
  return "cpu";
}

// The device the model runs on: the loader's index, or the current device.
inline int32_t aoti_resolve_device(const std::string& device_str) {
  const int index = aoti_device_index(device_str);
  return index >= 0 ? index : abi().stream_device(current_stream(-1));
}

inline void aoti_check(AOTITorchError status, const char* what) {
  if (status != AOTI_TORCH_SUCCESS) {
    throw std::runtime_error(std::string("loading the model's weights: ") +
                             what + " failed");
  }
}

// Copies the weights embedded in the model (`blob`, in the order of
// `constants`, as model_base.h's load_constants reads them) to mydev device
// `device` and puts them in `constants_map`, unless another model of the same
// container already did. `constants` is model_base.h's ConstInfo list.
template <typename ConstInfos, typename ConstantMap>
void aoti_load_constants_to_device(const ConstInfos& constants,
                                   ConstantMap& constants_map,
                                   const uint8_t* blob, int32_t device) {
  if (!constants_map.empty()) {
    return;
  }
  const int32_t mydev = aoti_torch_device_type_privateuse1();
  size_t bytes_read = 0;
  for (const auto& info : constants) {
    if (info.from_folded) {
      continue;
    }
    const int64_t ndim = static_cast<int64_t>(info.shape.size());
    AtenTensorHandle constant = nullptr;
    if (info.data_size == 0) {
      aoti_check(
          aoti_torch_empty_strided(ndim, info.shape.data(), info.stride.data(),
                                   info.dtype, mydev, device, &constant),
          "empty_strided");
    } else {
      // The storage as it is stored (data_size bytes, padded to 64), then
      // the constant's view of it.
      const int64_t numel = static_cast<int64_t>(
          info.data_size / aoti_torch_dtype_element_size(info.dtype));
      const int64_t unit_stride = 1;
      AtenTensorHandle host = nullptr;
      aoti_check(
          aoti_torch_create_tensor_from_blob(
              const_cast<uint8_t*>(blob + bytes_read), 1, &numel, &unit_stride,
              0, info.dtype, aoti_torch_device_type_cpu(), 0, &host),
          "create_tensor_from_blob");
      torch::aot_inductor::RAIIAtenTensorHandle host_storage(host);
      AtenTensorHandle storage = nullptr;
      aoti_check(aoti_torch_empty_strided(1, &numel, &unit_stride, info.dtype,
                                          mydev, device, &storage),
                 "empty_strided");
      torch::aot_inductor::RAIIAtenTensorHandle device_storage(storage);
      aoti_check(aoti_torch_copy_(storage, host, 0), "copy_");
      aoti_check(aoti_torch__reinterpret_tensor(
                     storage, ndim, info.shape.data(), info.stride.data(),
                     info.offset, &constant),
                 "_reinterpret_tensor");
    }
    bytes_read += info.data_size;
    constants_map.emplace(info.name, constant);
  }
}

// The AOTInductor stream guard (DeviceOpOverrides.cpp_aoti_stream_guard):
// the loader already made `stream` current on the model's device for the
// run; this checks that the stream the model was handed is that device's.
class AotiStreamGuard {
 public:
  AotiStreamGuard(void* stream, int32_t device) {
    const int stream_device = abi().stream_device(stream);
    if (stream_device < 0) {
      throw std::runtime_error(abi().last_error());
    }
    if (stream_device != device) {
      throw std::runtime_error(
          "the model runs on " + std::string(kAotiDeviceName) + ":" +
          std::to_string(device) + " but was given a stream of " +
          kAotiDeviceName + ":" + std::to_string(stream_device));
    }
  }
  AotiStreamGuard(const AotiStreamGuard&) = delete;
  AotiStreamGuard& operator=(const AotiStreamGuard&) = delete;
};

}  // namespace mydev_compiled

#pragma GCC visibility pop
