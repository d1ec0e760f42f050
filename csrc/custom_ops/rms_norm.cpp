// mydev::rms_norm and mydev::rms_norm_backward: the host side (checks,
// layout, allocation, launch). The kernel bodies are in rms_norm_kernel.h.
#include <ATen/ops/empty.h>

#include "custom_ops.h"
#include "fused_launch.h"
#include "kernel_table.h"
#include "op_checks.h"

namespace mydev::custom_ops {
namespace {

void checkRmsNormInputs(const char* op, const at::Tensor& x,
                        const at::Tensor& weight, double eps) {
  checkActivation(op, "x", x);
  TORCH_CHECK(x.dim() >= 1, op,
              ": x must have at least 1 dimension [..., hidden], got a ",
              x.dim(), "-d tensor");
  checkActivation(op, "weight", weight);
  checkSameDevice(op, "weight", weight, "x", x);
  checkParamDtype(op, "weight", weight, x);
  TORCH_CHECK(weight.dim() == 1 && weight.size(0) == x.size(-1), op,
              ": weight must have shape [hidden] = [", x.size(-1), "], got ",
              weight.sizes());
  TORCH_CHECK(eps >= 0, op, ": eps must be >= 0, got ", eps);
}

// The kernels, on host tensors (CPU tensors, or host views of device memory
// inside a device kernel), contiguous, of the checked shapes and dtypes.
void rmsNormForwardOnHost(const at::Tensor& x, const at::Tensor& weight,
                          double eps, const at::Tensor& out) {
  RmsNormForwardParams p{};
  p.x = x.const_data_ptr();
  p.weight = weight.const_data_ptr();
  p.out = out.mutable_data_ptr();
  p.hidden = x.size(-1);
  p.rows = x.numel() / p.hidden;
  p.eps = static_cast<float>(eps);
  p.x_type = x.scalar_type();
  p.weight_type = weight.scalar_type();
  kernelTable().rms_norm_forward(p);
}

void rmsNormBackwardOnHost(const at::Tensor& grad_out, const at::Tensor& x,
                           const at::Tensor& weight, double eps,
                           const at::Tensor& grad_x,
                           const at::Tensor& grad_weight,
                           const at::Tensor& workspace) {
  RmsNormBackwardParams p{};
  p.grad_out = grad_out.const_data_ptr();
  p.x = x.const_data_ptr();
  p.weight = weight.const_data_ptr();
  p.grad_x = grad_x.mutable_data_ptr();
  p.grad_weight = grad_weight.mutable_data_ptr();
  p.workspace = workspace.mutable_data_ptr<float>();
  p.hidden = x.size(-1);
  p.rows = x.numel() / p.hidden;
  p.chunks = workspace.size(0);
  p.eps = static_cast<float>(eps);
  p.x_type = x.scalar_type();
  p.weight_type = weight.scalar_type();
  kernelTable().rms_norm_backward(p);
}

}  // namespace

at::Tensor rmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  constexpr const char* kOp = "mydev::rms_norm";
  checkRmsNormInputs(kOp, x, weight, eps);
  const at::Tensor x_in = contiguousInput(x);
  const at::Tensor weight_in = contiguousInput(weight);
  at::Tensor out = at::empty(x.sizes(), x.options());
  if (out.numel() == 0) {
    return out;
  }
  runFusedKernel(
      "mydev::rms_norm", x.device(),
      [eps](const at::Tensor& x, const at::Tensor& weight,
            const at::Tensor& out) {
        rmsNormForwardOnHost(x, weight, eps, out);
      },
      x_in, weight_in, out);
  return out;
}

std::tuple<at::Tensor, at::Tensor> rmsNormBackward(const at::Tensor& grad_out,
                                                   const at::Tensor& x,
                                                   const at::Tensor& weight,
                                                   double eps) {
  constexpr const char* kOp = "mydev::rms_norm_backward";
  checkRmsNormInputs(kOp, x, weight, eps);
  checkActivation(kOp, "grad_out", grad_out);
  checkSameDevice(kOp, "grad_out", grad_out, "x", x);
  TORCH_CHECK(grad_out.sizes() == x.sizes() &&
                  grad_out.scalar_type() == x.scalar_type(),
              kOp, ": grad_out must have x's shape ", x.sizes(), " and dtype ",
              x.scalar_type(), ", got ", grad_out.sizes(), " ",
              grad_out.scalar_type());
  at::Tensor grad_x = at::empty(x.sizes(), x.options());
  at::Tensor grad_weight = at::empty(weight.sizes(), weight.options());
  const int64_t hidden = x.size(-1);
  if (hidden == 0) {
    return {grad_x, grad_weight};
  }
  const int64_t rows = x.numel() / hidden;
  // The float32 partial sums of grad_weight, one row per chunk of rows:
  // device memory, allocated here like the outputs.
  at::Tensor workspace = at::empty({rmsNormGradWeightChunks(rows), hidden},
                                   x.options().dtype(at::kFloat));
  runFusedKernel(
      "mydev::rms_norm_backward", x.device(),
      [eps](const at::Tensor& grad_out, const at::Tensor& x,
            const at::Tensor& weight, const at::Tensor& grad_x,
            const at::Tensor& grad_weight, const at::Tensor& workspace) {
        rmsNormBackwardOnHost(grad_out, x, weight, eps, grad_x, grad_weight,
                              workspace);
      },
      contiguousInput(grad_out), contiguousInput(x), contiguousInput(weight),
      grad_x, grad_weight, workspace);
  return {grad_x, grad_weight};
}

}  // namespace mydev::custom_ops
