// Nested tensors on mydev. They can be created on the device (e.g. by
// torch._nested_tensor_from_mask, which the device-kernel path runs), moved
// to and from it, copied and cloned: ATen's nested kernels for that
// structure work (allocation, buffer copies, metadata) are device-generic, so
// they are registered as they are. The device has no kernels that compute on
// the nested layout, so every other nested operation follows the CPU
// fallback policy. Note that
// nn.TransformerEncoder in eval mode with a padding mask takes PyTorch's
// nested-tensor fast path for PrivateUse1 devices, as it does for cuda.
#include <ATen/ops/_nested_tensor_size_native.h>
#include <ATen/ops/_nested_tensor_storage_offsets_native.h>
#include <ATen/ops/_nested_tensor_strides_native.h>
#include <ATen/ops/_to_copy_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/empty_like_native.h>
#include <torch/library.h>

#include "../core/device.h"
#include "cpu_fallback_policy.h"

namespace mydev {
namespace {

void nestedOnCpuIfAllowed(const c10::OperatorHandle& op, c10::DispatchKeySet,
                          torch::jit::Stack* stack) {
  static const std::string why =
      c10::str(kDeviceName, " has no kernels for nested tensors");
  runOnCpuIfAllowed(op, stack, why.c_str(), c10::DispatchKey::NestedTensorCPU);
}

}  // namespace

TORCH_LIBRARY_IMPL(_, NestedTensorPrivateUse1, m) {
  m.fallback(
      torch::CppFunction::makeFromBoxedFunction<&nestedOnCpuIfAllowed>());
}

TORCH_LIBRARY_IMPL(aten, NestedTensorPrivateUse1, m) {
  m.impl("_to_copy", TORCH_FN(at::native::_to_copy_nested));
  m.impl("empty_like", TORCH_FN(at::native::empty_like_nested));
  m.impl("copy_", TORCH_FN(at::native::copy_nested_));
  m.impl("clone", TORCH_FN(at::native::clone_nested));
  m.impl("_nested_tensor_size", TORCH_FN(at::native::_nested_tensor_size));
  m.impl("_nested_tensor_strides",
         TORCH_FN(at::native::_nested_tensor_strides));
  m.impl("_nested_tensor_storage_offsets",
         TORCH_FN(at::native::_nested_tensor_storage_offsets));
}

}  // namespace mydev
