// The fused LSTM and GRU cells of nn.LSTM / nn.GRU / nn.LSTMCell / nn.GRUCell.
//
// ATen's recurrent layers call the fused cell ops for every device other than
// the CPU (the CPU computes cells from a handful of pointwise ops instead),
// and those ops have CUDA kernels only, so mydev brings its own: one device
// kernel per call, computing the cell with ATen's CPU ops over host views, in
// the CPU path's order of operations so that values match the CPU's. The
// workspace layouts are CUDA's (the backward ops read them):
//   LSTM: [B, 4H] activated gates (input, forget, cell, output);
//   GRU:  [B, 5H] reset gate, update gate, new gate, hx, hidden new-gate part.
// With grad mode on (double backward), autograd uses the composite
// "differentiable" backward ops instead, which need no device kernel.
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/add.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <optional>
#include <tuple>
#include <vector>

#include "host_view.h"
#include "kernel_launch.h"

namespace mydev {
namespace {

void checkOnDeviceOf(const at::Tensor& reference, const char* op,
                     std::initializer_list<const at::Tensor*> tensors) {
  for (const at::Tensor* t : tensors) {
    if (t->defined() && t->device() != reference.device()) {
      TORCH_CHECK(false,
                  "Expected all tensors to be on the same device, but found at "
                  "least two devices, ",
                  reference.device(), " and ", t->device(), "! (in ", op, ")");
    }
  }
}

at::Tensor presentOrUndefined(const std::optional<at::Tensor>& t) {
  return t.has_value() ? *t : at::Tensor();
}

at::Tensor hostViewOrUndefined(const at::Tensor& t) {
  return t.defined() ? hostView(t) : at::Tensor();
}

// Gates of one side of the cell as the CPU path computes them (linear with
// bias): matmul result plus its bias.
at::Tensor withBias(const at::Tensor& gates, const at::Tensor& bias) {
  return bias.defined() ? gates + bias : gates;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> lstmCell(
    const at::Tensor& input_gates, const at::Tensor& hidden_gates,
    const at::Tensor& cx, const std::optional<at::Tensor>& input_bias_arg,
    const std::optional<at::Tensor>& hidden_bias_arg) {
  const at::Tensor input_bias = presentOrUndefined(input_bias_arg);
  const at::Tensor hidden_bias = presentOrUndefined(hidden_bias_arg);
  checkOnDeviceOf(input_gates, "_thnn_fused_lstm_cell",
                  {&hidden_gates, &cx, &input_bias, &hidden_bias});
  TORCH_CHECK(
      input_gates.dim() == 2 && input_gates.sizes() == hidden_gates.sizes() &&
          input_gates.size(1) == 4 * cx.size(-1),
      "_thnn_fused_lstm_cell: expected input_gates and hidden_gates of shape "
      "[batch, 4 * hidden] matching cx ",
      cx.sizes(), ", got ", input_gates.sizes(), " and ", hidden_gates.sizes());
  const c10::DeviceGuard guard(input_gates.device());
  at::Tensor hy = at::empty_like(cx, at::MemoryFormat::Contiguous);
  at::Tensor cy = at::empty_like(cx, at::MemoryFormat::Contiguous);
  at::Tensor workspace =
      at::empty_like(input_gates, at::MemoryFormat::Contiguous);
  launchKernel(
      "_thnn_fused_lstm_cell",
      [igates = hostView(input_gates), hgates = hostView(hidden_gates),
       cx = hostView(cx), ib = hostViewOrUndefined(input_bias),
       hb = hostViewOrUndefined(hidden_bias), hy = hostView(hy),
       cy = hostView(cy), workspace = hostView(workspace)]() mutable {
        workspace.copy_(withBias(hgates, hb).add_(withBias(igates, ib)));
        auto gates = workspace.unsafe_chunk(4, 1);
        gates[0].sigmoid_();
        gates[1].sigmoid_();
        gates[2].tanh_();
        gates[3].sigmoid_();
        cy.copy_((gates[1] * cx).add_(gates[0] * gates[2]));
        at::mul_out(hy, gates[3], cy.tanh());
      });
  return {hy, cy, workspace};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> lstmCellBackward(
    const std::optional<at::Tensor>& grad_hy_arg,
    const std::optional<at::Tensor>& grad_cy_arg, const at::Tensor& cx,
    const at::Tensor& cy, const at::Tensor& workspace, bool has_bias) {
  const at::Tensor grad_hy = presentOrUndefined(grad_hy_arg);
  const at::Tensor grad_cy = presentOrUndefined(grad_cy_arg);
  if (!grad_hy.defined() && !grad_cy.defined()) {
    return {};
  }
  checkOnDeviceOf(workspace, "_thnn_fused_lstm_cell_backward_impl",
                  {&grad_hy, &grad_cy, &cx, &cy});
  const c10::DeviceGuard guard(workspace.device());
  at::Tensor grad_gates =
      at::empty_like(workspace, at::MemoryFormat::Contiguous);
  at::Tensor grad_cx = at::empty_like(cx, at::MemoryFormat::Contiguous);
  at::Tensor grad_bias =
      has_bias ? at::empty({workspace.size(1)}, workspace.options())
               : at::Tensor();
  launchKernel("_thnn_fused_lstm_cell_backward_impl",
               [grad_hy = hostViewOrUndefined(grad_hy),
                grad_cy = hostViewOrUndefined(grad_cy), cx = hostView(cx),
                cy = hostView(cy), workspace = hostView(workspace),
                grad_gates = hostView(grad_gates), grad_cx = hostView(grad_cx),
                grad_bias = hostViewOrUndefined(grad_bias)]() mutable {
                 const auto gates = workspace.unsafe_chunk(4, 1);
                 const at::Tensor& in = gates[0];
                 const at::Tensor& forget = gates[1];
                 const at::Tensor& cell = gates[2];
                 const at::Tensor& out = gates[3];
                 const at::Tensor tanh_cy = cy.tanh();
                 // Gradient reaching cy: through hy = out * tanh(cy), and
                 // directly.
                 at::Tensor grad_c = at::zeros_like(cy);
                 if (grad_hy.defined()) {
                   grad_c.add_(grad_hy * out * (1 - tanh_cy * tanh_cy));
                 }
                 if (grad_cy.defined()) {
                   grad_c.add_(grad_cy);
                 }
                 auto grads = grad_gates.unsafe_chunk(4, 1);
                 grads[0].copy_(grad_c * cell * in * (1 - in));
                 grads[1].copy_(grad_c * cx * forget * (1 - forget));
                 grads[2].copy_(grad_c * in * (1 - cell * cell));
                 if (grad_hy.defined()) {
                   grads[3].copy_(grad_hy * tanh_cy * out * (1 - out));
                 } else {
                   grads[3].zero_();
                 }
                 at::mul_out(grad_cx, grad_c, forget);
                 if (grad_bias.defined()) {
                   at::sum_out(grad_bias, grad_gates, {0});
                 }
               });
  return {grad_gates, grad_cx, grad_bias};
}

std::tuple<at::Tensor, at::Tensor> gruCell(
    const at::Tensor& input_gates, const at::Tensor& hidden_gates,
    const at::Tensor& hx, const std::optional<at::Tensor>& input_bias_arg,
    const std::optional<at::Tensor>& hidden_bias_arg) {
  const at::Tensor input_bias = presentOrUndefined(input_bias_arg);
  const at::Tensor hidden_bias = presentOrUndefined(hidden_bias_arg);
  checkOnDeviceOf(input_gates, "_thnn_fused_gru_cell",
                  {&hidden_gates, &hx, &input_bias, &hidden_bias});
  TORCH_CHECK(
      input_gates.dim() == 2 && input_gates.sizes() == hidden_gates.sizes() &&
          input_gates.size(1) == 3 * hx.size(-1),
      "_thnn_fused_gru_cell: expected input_gates and hidden_gates of shape "
      "[batch, 3 * hidden] matching hx ",
      hx.sizes(), ", got ", input_gates.sizes(), " and ", hidden_gates.sizes());
  const c10::DeviceGuard guard(input_gates.device());
  const int64_t hidden = hx.size(-1);
  at::Tensor hy = at::empty_like(hx, at::MemoryFormat::Contiguous);
  at::Tensor workspace = at::empty({hx.size(0), 5 * hidden}, hx.options());
  launchKernel("_thnn_fused_gru_cell",
               [igates = hostView(input_gates), hgates = hostView(hidden_gates),
                hx = hostView(hx), ib = hostViewOrUndefined(input_bias),
                hb = hostViewOrUndefined(hidden_bias), hy = hostView(hy),
                workspace = hostView(workspace)]() mutable {
                 const auto i = withBias(igates, ib).unsafe_chunk(3, 1);
                 const auto h = withBias(hgates, hb).unsafe_chunk(3, 1);
                 auto ws = workspace.unsafe_chunk(5, 1);
                 at::add_out(ws[0], h[0], i[0]).sigmoid_();  // reset gate
                 at::add_out(ws[1], h[1], i[1]).sigmoid_();  // update gate
                 ws[4].copy_(h[2]);
                 at::add_out(ws[2], i[2], h[2] * ws[0]).tanh_();  // new gate
                 ws[3].copy_(hx);
                 at::add_out(hy, (hx - ws[2]).mul_(ws[1]), ws[2]);
               });
  return {hy, workspace};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>
gruCellBackward(const at::Tensor& grad_hy, const at::Tensor& workspace,
                bool has_bias) {
  checkOnDeviceOf(workspace, "_thnn_fused_gru_cell_backward", {&grad_hy});
  TORCH_CHECK(workspace.dim() == 2 && workspace.size(1) == 5 * grad_hy.size(-1),
              "_thnn_fused_gru_cell_backward: expected a workspace of shape "
              "[batch, 5 * hidden] "
              "for grad_hy ",
              grad_hy.sizes(), ", got ", workspace.sizes());
  const c10::DeviceGuard guard(workspace.device());
  const int64_t hidden = grad_hy.size(-1);
  const auto options = workspace.options();
  at::Tensor grad_input_gates =
      at::empty({grad_hy.size(0), 3 * hidden}, options);
  at::Tensor grad_hidden_gates =
      at::empty({grad_hy.size(0), 3 * hidden}, options);
  at::Tensor grad_hx = at::empty_like(grad_hy, at::MemoryFormat::Contiguous);
  at::Tensor grad_input_bias =
      has_bias ? at::empty({3 * hidden}, options) : at::Tensor();
  at::Tensor grad_hidden_bias =
      has_bias ? at::empty({3 * hidden}, options) : at::Tensor();
  launchKernel(
      "_thnn_fused_gru_cell_backward",
      [grad_hy = hostView(grad_hy), workspace = hostView(workspace),
       grad_input_gates = hostView(grad_input_gates),
       grad_hidden_gates = hostView(grad_hidden_gates),
       grad_hx = hostView(grad_hx),
       grad_input_bias = hostViewOrUndefined(grad_input_bias),
       grad_hidden_bias = hostViewOrUndefined(grad_hidden_bias)]() mutable {
        const auto ws = workspace.unsafe_chunk(5, 1);
        const at::Tensor& reset = ws[0];
        const at::Tensor& update = ws[1];
        const at::Tensor& fresh = ws[2];
        const at::Tensor& hx = ws[3];
        const at::Tensor& hidden_new = ws[4];
        auto gi = grad_input_gates.unsafe_chunk(3, 1);
        auto gh = grad_hidden_gates.unsafe_chunk(3, 1);
        const at::Tensor grad_new =
            grad_hy * (1 - update) * (1 - fresh * fresh);
        const at::Tensor grad_reset =
            grad_new * hidden_new * (1 - reset) * reset;
        const at::Tensor grad_update =
            grad_hy * (hx - fresh) * (1 - update) * update;
        gi[0].copy_(grad_reset);
        gi[1].copy_(grad_update);
        gi[2].copy_(grad_new);
        gh[0].copy_(grad_reset);
        gh[1].copy_(grad_update);
        at::mul_out(gh[2], grad_new, reset);
        at::mul_out(grad_hx, grad_hy, update);
        if (grad_input_bias.defined()) {
          at::sum_out(grad_input_bias, grad_input_gates, {0});
          at::sum_out(grad_hidden_bias, grad_hidden_gates, {0});
        }
      });
  return {grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias,
          grad_hidden_bias};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", lstmCell);
  m.impl("_thnn_fused_lstm_cell_backward_impl", lstmCellBackward);
  m.impl("_thnn_fused_gru_cell", gruCell);
  m.impl("_thnn_fused_gru_cell_backward", gruCellBackward);
}

}  // namespace mydev
