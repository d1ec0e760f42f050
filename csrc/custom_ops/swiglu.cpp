// mydev::swiglu and mydev::swiglu_backward: the host side (checks, layout,
// allocation, launch). The kernel bodies are in swiglu_kernel.h.
#include <ATen/ops/empty.h>

#include "custom_ops.h"
#include "fused_launch.h"
#include "kernel_table.h"
#include "op_checks.h"

namespace mydev::custom_ops {
namespace {

void checkSwigluInputs(const char* op, const at::Tensor& gate,
                       const at::Tensor& up) {
  checkActivation(op, "gate", gate);
  checkActivation(op, "up", up);
  checkSameDevice(op, "up", up, "gate", gate);
  TORCH_CHECK(up.scalar_type() == gate.scalar_type(), op,
              ": up must have gate's dtype (", gate.scalar_type(), "), got ",
              up.scalar_type());
  TORCH_CHECK(up.sizes() == gate.sizes(), op, ": up must have gate's shape ",
              gate.sizes(), ", got ", up.sizes());
}

// The kernels, on contiguous host tensors of one shape and dtype.
void swigluForwardOnHost(const at::Tensor& gate, const at::Tensor& up,
                         const at::Tensor& out) {
  SwigluForwardParams p{};
  p.gate = gate.const_data_ptr();
  p.up = up.const_data_ptr();
  p.out = out.mutable_data_ptr();
  p.n = gate.numel();
  p.type = gate.scalar_type();
  kernelTable().swiglu_forward(p);
}

void swigluBackwardOnHost(const at::Tensor& grad_out, const at::Tensor& gate,
                          const at::Tensor& up, const at::Tensor& grad_gate,
                          const at::Tensor& grad_up) {
  SwigluBackwardParams p{};
  p.grad_out = grad_out.const_data_ptr();
  p.gate = gate.const_data_ptr();
  p.up = up.const_data_ptr();
  p.grad_gate = grad_gate.mutable_data_ptr();
  p.grad_up = grad_up.mutable_data_ptr();
  p.n = gate.numel();
  p.type = gate.scalar_type();
  kernelTable().swiglu_backward(p);
}

}  // namespace

at::Tensor swiglu(const at::Tensor& gate, const at::Tensor& up) {
  checkSwigluInputs("mydev::swiglu", gate, up);
  at::Tensor out = at::empty(gate.sizes(), gate.options());
  if (out.numel() == 0) {
    return out;
  }
  runFusedKernel("mydev::swiglu", gate.device(), &swigluForwardOnHost,
                 contiguousInput(gate), contiguousInput(up), out);
  return out;
}

std::tuple<at::Tensor, at::Tensor> swigluBackward(const at::Tensor& grad_out,
                                                  const at::Tensor& gate,
                                                  const at::Tensor& up) {
  constexpr const char* kOp = "mydev::swiglu_backward";
  checkSwigluInputs(kOp, gate, up);
  checkActivation(kOp, "grad_out", grad_out);
  checkSameDevice(kOp, "grad_out", grad_out, "gate", gate);
  TORCH_CHECK(grad_out.sizes() == gate.sizes() &&
                  grad_out.scalar_type() == gate.scalar_type(),
              kOp, ": grad_out must have gate's shape ", gate.sizes(),
              " and dtype ", gate.scalar_type(), ", got ", grad_out.sizes(),
              " ", grad_out.scalar_type());
  at::Tensor grad_gate = at::empty(gate.sizes(), gate.options());
  at::Tensor grad_up = at::empty(gate.sizes(), gate.options());
  if (gate.numel() == 0) {
    return {grad_gate, grad_up};
  }
  runFusedKernel("mydev::swiglu_backward", gate.device(), &swigluBackwardOnHost,
                 contiguousInput(grad_out), contiguousInput(gate),
                 contiguousInput(up), grad_gate, grad_up);
  return {grad_gate, grad_up};
}

}  // namespace mydev::custom_ops
