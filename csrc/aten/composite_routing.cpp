// Ops whose generic (composite) implementation can't serve a PrivateUse1
// device, routed to the device-kernel path explicitly:
//  - convolutions: for devices other than CPU/CUDA-like ones, ATen calls the
//    "overrideable" hooks, which have no implementation of their own. The
//    device runs aten::convolution / aten::convolution_backward instead,
//    whose CPU kernels choose the best CPU algorithm over host views.
//  - _batch_norm_no_update: its composite kernel calls the CPU batch norm
//    directly, which asserts CPU tensors.
//  - native_layer_norm, native_group_norm, addr: their composite kernels
//    are math decompositions (layer_norm through batch_norm), with other
//    numerics than the CPU kernels and no reduced-precision support.
//  - mode.values, conj_physical_: their composite kernels check for CPU/CUDA
//    devices or call a DispatchStub for the tensor's own device.
//  - mse_loss, smooth_l1_loss: their generated composite kernels call the
//    out= overload, whose CPU kernel uses `out` as scratch of the input's
//    shape (resizing a 0-dim output, with a deprecation warning the CPU's
//    functional call never gives); the device-kernel path runs the
//    functional CPU kernel instead (see outVariantMisbehaves).
//  - index_fill, masked_fill, masked_scatter: their composite kernels are a
//    clone and the in-place op, which on a device are two dispatches and two
//    launches. Routed whole, they are one launch whose kernel runs the same
//    composite over host views (the clone's allocation lands in the output,
//    cpu_allocation_redirect.h): an attention mask's masked_fill costs one
//    launch, as the CPU pays one call.
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include "device_kernel_path.h"

namespace mydev {
namespace {

c10::OperatorHandle operatorNamed(const char* name, const char* overload) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
}

at::Tensor convolutionOverrideable(
    const at::Tensor& input, const at::Tensor& weight,
    const std::optional<at::Tensor>& bias, c10::IntArrayRef stride,
    c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
    c10::IntArrayRef output_padding, int64_t groups) {
  static const c10::OperatorHandle convolution =
      operatorNamed("aten::convolution", "");
  torch::jit::Stack stack{input,    weight,     bias,           stride, padding,
                          dilation, transposed, output_padding, groups};
  runOnDevice(convolution, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
              &stack);
  return stack[0].toTensor();
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolutionBackwardOverrideable(
    const at::Tensor& grad_output, const at::Tensor& input,
    const at::Tensor& weight, c10::IntArrayRef stride, c10::IntArrayRef padding,
    c10::IntArrayRef dilation, bool transposed, c10::IntArrayRef output_padding,
    int64_t groups, std::array<bool, 3> output_mask) {
  static const c10::OperatorHandle backward =
      operatorNamed("aten::convolution_backward", "");
  // The overrideable hook doesn't carry the bias shape; it is one value per
  // output channel.
  std::optional<std::vector<int64_t>> bias_sizes;
  if (output_mask[2]) {
    bias_sizes = std::vector<int64_t>{transposed ? weight.size(1) * groups
                                                 : weight.size(0)};
  }
  torch::jit::Stack stack{
      grad_output,
      input,
      weight,
      bias_sizes,
      stride,
      padding,
      dilation,
      transposed,
      output_padding,
      groups,
      c10::List<bool>({output_mask[0], output_mask[1], output_mask[2]})};
  runOnDevice(backward, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
              &stack);
  return {stack[0].toTensor(), stack[1].toTensor(), stack[2].toTensor()};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", convolutionOverrideable);
  m.impl("convolution_backward_overrideable", convolutionBackwardOverrideable);
  m.impl("_batch_norm_no_update",
         torch::CppFunction::makeFromBoxedFunction<&runOnDevice>());
  for (const char* name :
       {"mse_loss", "smooth_l1_loss", "native_layer_norm", "native_group_norm",
        "addr", "mode.values", "conj_physical_", "index_fill.int_Scalar",
        "index_fill.int_Tensor", "masked_fill.Scalar", "masked_fill.Tensor",
        "masked_scatter"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&runOnDevice>());
  }
}

}  // namespace mydev
