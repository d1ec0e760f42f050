// AOTInductor packages compiled for mydev: the model runner that torch's
// package loader (torch::inductor::AOTIModelPackageLoader, behind
// torch._inductor.aoti_load_package) creates for the device key "mydev".
// It works the same in a Python process and in a C++ program that links the
// library: it hands the model the launch table before creating it, runs it
// on the device the loader asks for, and makes the stream it runs on the
// current one, so that the ATen ops the model dispatches are ordered with its
// kernels. The model's side of this is device_ext/include/mydev_aoti.h.
#include <ATen/Tensor.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/StreamGuard.h>
#include <dlfcn.h>
#include <elf.h>
#include <torch/csrc/inductor/aoti_runner/model_container_runner.h>
#include <torch/csrc/inductor/aoti_torch/utils.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "compiled_kernel_abi.h"
#include "device.h"
#include "mydev_stream.h"

namespace mydev {
namespace {

// Defined by mydev_aoti.h in every model compiled for mydev.
constexpr char kBindSymbol[] = "mydev_aoti_bind_kernel_abi";
using BindKernelAbi = int (*)(const MydevCompiledKernelAbi*);

// "mydev" or "mydev:N" as the package loader passes it (no index: the
// current device).
c10::Device modelDevice(const std::string& device_str) {
  const c10::Device device(device_str);
  TORCH_CHECK(device.type() == c10::DeviceType::PrivateUse1, "the ",
              kDeviceName, " AOTInductor runner cannot run on ", device_str);
  const c10::DeviceIndex index =
      device.has_index() ? device.index() : currentDevice();
  checkDeviceIndex(index);
  return c10::Device(c10::DeviceType::PrivateUse1, index);
}

// dlopen maps a library's segments without checking that the file holds
// them: a model library cut short (a truncated package, a partial copy)
// faults with SIGBUS while it is being loaded. Refuse it first.
void checkCompleteLibrary(const std::string& path) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  TORCH_CHECK(file, "cannot open the AOTInductor model ", path);
  const auto size = static_cast<uint64_t>(file.tellg());
  Elf64_Ehdr header{};
  file.seekg(0);
  const bool elf =
      file.read(reinterpret_cast<char*>(&header), sizeof(header)) &&
      std::memcmp(header.e_ident, ELFMAG, SELFMAG) == 0 &&
      header.e_ident[EI_CLASS] == ELFCLASS64 &&
      header.e_phentsize == sizeof(Elf64_Phdr) &&
      header.e_phoff + uint64_t{header.e_phnum} * sizeof(Elf64_Phdr) <= size;
  TORCH_CHECK(elf, "the AOTInductor model ", path,
              " is not a complete shared library (the package is damaged)");
  for (int index = 0; index < header.e_phnum; ++index) {
    Elf64_Phdr segment{};
    file.seekg(static_cast<std::streamoff>(header.e_phoff +
                                           index * sizeof(Elf64_Phdr)));
    file.read(reinterpret_cast<char*>(&segment), sizeof(segment));
    TORCH_CHECK(file && segment.p_offset + segment.p_filesz <= size,
                "the AOTInductor model ", path, " is cut short: ", size,
                " bytes, but its segments need ",
                segment.p_offset + segment.p_filesz,
                " (the package is damaged)");
  }
}

// The model library, opened before the runner opens it (same path, so the
// same loaded object) to hand it the launch table; closed once the runner
// holds it.
class BoundModelLibrary {
 public:
  explicit BoundModelLibrary(const std::string& path)
      : handle_((checkCompleteLibrary(path),
                 dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL))) {
    TORCH_CHECK(handle_ != nullptr, "cannot load the AOTInductor model ", path,
                ": ", dlerror());
    const auto bind =
        reinterpret_cast<BindKernelAbi>(dlsym(handle_, kBindSymbol));
    TORCH_CHECK(bind != nullptr, "the AOTInductor model ", path,
                " was not compiled for ", kDeviceName, " (it has no ",
                kBindSymbol, ")");
    const MydevCompiledKernelAbi& table = compiledKernelAbi();
    const int model_version = bind(&table);
    TORCH_CHECK(model_version == table.version, "the AOTInductor model ", path,
                " was compiled for ", kDeviceName, " kernel ABI ",
                model_version, ", but this library provides ", table.version,
                "; compile the package again");
  }
  BoundModelLibrary(const BoundModelLibrary&) = delete;
  BoundModelLibrary& operator=(const BoundModelLibrary&) = delete;
  ~BoundModelLibrary() { dlclose(handle_); }

 private:
  void* handle_;
};

// The torch stream whose driver handle a caller passed to run().
MydevStream streamOfHandle(c10::DeviceIndex device, void* handle) {
  const c10::StreamId id =
      streamIdOfHandle(device, static_cast<mydevStream_t>(handle));
  TORCH_CHECK(id >= 0,
              "the stream handle passed to the AOTInductor model is "
              "not a stream of ",
              kDeviceName, ":", static_cast<int>(device));
  return MydevStream(
      c10::Stream(c10::Stream::UNSAFE,
                  c10::Device(c10::DeviceType::PrivateUse1, device), id));
}

// torch's container copies weights handed to it into its own buffer with a
// host memcpy (from device memory too: the host faults on it). Refused with
// the way that works: weights the caller keeps (user_managed=True).
[[noreturn]] void refuseCopiedWeights() {
  TORCH_CHECK(false, "an AOTInductor model on ", kDeviceName,
              " cannot copy new weights into its own buffer; load them with "
              "user_managed=True (",
              kDeviceName,
              " tensors on the model's device, kept alive by the caller)");
}

AOTIRuntimeError refuseCopiedWeights(AOTInductorModelContainerHandle,
                                     AOTInductorConstantMapHandle, bool, bool) {
  refuseCopiedWeights();
}

AOTIRuntimeError refuseCopiedInactiveWeights(AOTInductorModelContainerHandle,
                                             AOTInductorConstantMapHandle) {
  refuseCopiedWeights();
}

class MydevModelRunner : public torch::inductor::AOTIModelContainerRunner {
 public:
  MydevModelRunner(const std::string& model_so_path, size_t num_models,
                   c10::Device device, const std::string& bin_dir,
                   bool run_single_threaded)
      : AOTIModelContainerRunner(model_so_path, num_models, device.str(),
                                 bin_dir, run_single_threaded),
        device_(device) {
    update_constant_buffer_func_ = refuseCopiedWeights;
    update_constant_buffer_from_cpu_func_ = refuseCopiedWeights;
    update_inactive_constant_buffer_func_ = &refuseCopiedInactiveWeights;
  }

 protected:
  std::vector<at::Tensor> run_impl(std::vector<AtenTensorHandle>& inputs,
                                   void* stream_handle) override {
    // Kernels would get host pointers for CPU inputs (and another device's
    // pointers for inputs elsewhere): refuse them here, by position.
    for (size_t index = 0; index < inputs.size(); ++index) {
      const at::Tensor* input =
          torch::aot_inductor::tensor_handle_to_tensor_pointer(inputs[index]);
      TORCH_CHECK(input->device() == device_, "the AOTInductor model runs on ",
                  device_.str(), ", but input ", index, " is on ",
                  input->device().str());
    }
    const c10::DeviceGuard device_guard(device_);
    const MydevStream stream =
        stream_handle == nullptr
            ? getCurrentStream(device_.index())
            : streamOfHandle(device_.index(), stream_handle);
    const c10::StreamGuard stream_guard(stream.unwrap());
    return AOTIModelContainerRunner::run_impl(inputs, stream.raw());
  }

 private:
  const c10::Device device_;
};

std::unique_ptr<torch::inductor::AOTIModelContainerRunner> createRunner(
    const std::string& model_so_path, size_t num_models,
    const std::string& device_str, const std::string& bin_dir,
    const bool run_single_threaded) {
  const c10::Device device = modelDevice(device_str);
  const BoundModelLibrary library(model_so_path);
  return std::make_unique<MydevModelRunner>(model_so_path, num_models, device,
                                            bin_dir, run_single_threaded);
}

const torch::inductor::RegisterAOTIModelRunner kRegisterRunner(kDeviceName,
                                                               &createRunner);

}  // namespace
}  // namespace mydev
