// C++ Meta kernels for activations and losses that have no at::meta kernel:
// log_sigmoid, prelu, huber_loss and binary_cross_entropy, forward and
// backward, logit, and the backward kernels of mse_loss and dropout. torch's
// Meta kernels for them are Python, and the first one a process runs imports
// torch._dynamo (native_meta_kernels.h). Each lays its results out as the
// CPU kernel does; a call it does not model throws, and the device-kernel
// path then runs the CPU kernel synchronously, which raises the CPU's own
// error at the call.
#include <ATen/ExpandUtils.h>
#include <ATen/ScalarOps.h>
#include <ATen/TensorIterator.h>
#include <ATen/core/Reduction.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mul_meta_dispatch.h>

#include "meta_layouts.h"
#include "native_meta_table.h"

namespace mydev {
namespace {

using at::Tensor;

// Lays `out` out as the CPU kernels' TensorIterator over `inputs` does
// (resizing it only when the inputs broadcast past its shape).
Tensor& iterateInto(Tensor& out, std::initializer_list<const Tensor*> inputs) {
  at::TensorIteratorConfig config;
  config.add_output(out);
  for (const Tensor* input : inputs) {
    config.add_const_input(*input);
  }
  config.build();
  return out;
}

// A loss reduced to a mean or a sum is a 0-dim tensor of the loss's dtype.
Tensor reducedOr(Tensor unreduced, int64_t reduction) {
  if (reduction == at::Reduction::None) {
    return unreduced;
  }
  return at::empty({}, unreduced.options());
}

// The CPU kernel fills a contiguous output and buffer shaped like the input.
std::tuple<Tensor, Tensor> logSigmoidForwardMeta(const Tensor& self) {
  checkFloating(self, "log_sigmoid_forward");
  return {at::empty(self.sizes(), self.options()),
          at::empty(self.sizes(), self.options())};
}

// The CPU kernel iterates into empty_like(grad_output).
Tensor logSigmoidBackwardMeta(const Tensor& grad_output, const Tensor& self,
                              const Tensor& buffer) {
  checkFloating(self, "log_sigmoid_backward");
  Tensor grad_input = emptyLikeIn(grad_output, at::MemoryFormat::Preserve);
  return iterateInto(grad_input, {&self, &buffer, &grad_output});
}

// The CPU kernel iterates into empty_like(self), over self and the weight
// broadcast to it.
Tensor preluMeta(const Tensor& self, const Tensor& weight) {
  checkFloating(self, "_prelu_kernel");
  Tensor result = emptyLikeIn(self, at::MemoryFormat::Preserve);
  return iterateInto(result, {&self, &weight});
}

// The CPU kernel lets one TensorIterator lay out both gradients.
std::tuple<Tensor, Tensor> preluBackwardMeta(const Tensor& grad_output,
                                             const Tensor& self,
                                             const Tensor& weight) {
  checkFloating(self, "_prelu_kernel_backward");
  Tensor grad_self = at::empty({0}, self.options());
  Tensor grad_weight = at::empty({0}, weight.options());
  at::TensorIteratorConfig()
      .add_output(grad_self)
      .add_output(grad_weight)
      .add_const_input(self)
      .add_const_input(weight)
      .add_const_input(grad_output)
      .build();
  return {std::move(grad_self), std::move(grad_weight)};
}

// The CPU kernel: a binary op into empty_like(self), then the reduction.
Tensor huberLossMeta(const Tensor& self, const Tensor& target,
                     int64_t reduction, double delta) {
  TORCH_CHECK(delta > 0,
              "huber_loss does not support non-positive values for delta.");
  checkFloating(self, "huber_loss");
  Tensor loss = emptyLikeIn(self, at::MemoryFormat::Preserve);
  at::TensorIterator::borrowing_binary_op(loss, self, target);
  return reducedOr(std::move(loss), reduction);
}

// huber_loss_backward is composite: it zero-fills a contiguous gradient
// like the input and calls this out= overload, whose CPU kernel iterates
// into it.
Tensor& huberLossBackwardOutMeta(const Tensor& grad_output, const Tensor& self,
                                 const Tensor& target, int64_t /*reduction*/,
                                 double /*delta*/, Tensor& grad_input) {
  checkFloating(self, "huber_loss_backward");
  return iterateInto(grad_input, {&self, &target, &grad_output});
}

// mse_loss_backward's CPU kernel iterates into a contiguous gradient like
// the input.
Tensor mseLossBackwardMeta(const Tensor& grad_output, const Tensor& self,
                           const Tensor& target, int64_t /*reduction*/) {
  checkFloating(self, "mse_loss_backward");
  Tensor grad_input = at::empty(self.sizes(), self.options());
  return iterateInto(grad_input, {&self, &target, &grad_output});
}

// native_dropout_backward's CPU kernel is grad_output * mask * scale: the
// Python-number scale promotes an integral product to the default float
// dtype, as a wrapped number does.
Tensor nativeDropoutBackwardMeta(const Tensor& grad_output, const Tensor& mask,
                                 double scale) {
  return at::meta::mul(
      at::meta::mul(grad_output, mask),
      at::native::wrapped_scalar_tensor(scale, grad_output.device()));
}

// logit's CPU kernel is a unary float op, for real inputs.
Tensor logitMeta(const Tensor& self, std::optional<double> /*eps*/) {
  TORCH_CHECK(!self.is_complex(), "logit: the CPU kernel refuses complex");
  Tensor result;
  return at::TensorIterator::unary_float_op(result, self).output();
}

// binary_cross_entropy's CPU kernels iterate over the squeezed operands into
// empty_like(self), which the weight then multiplies in place.
void checkBinaryCrossEntropyOperands(const Tensor& self, const Tensor& target,
                                     const OptionalTensor& weight,
                                     const char* op) {
  checkFloating(self, op);
  const bool weight_fits =
      !weight.has_value() || !weight->defined() ||
      (weight->scalar_type() == self.scalar_type() &&
       at::infer_size(weight->sizes(), self.sizes()) == self.sizes());
  TORCH_CHECK(target.sizes() == self.sizes() &&
                  target.scalar_type() == self.scalar_type() && weight_fits,
              op, ": left to the CPU kernel");
}

Tensor binaryCrossEntropyMeta(const Tensor& self, const Tensor& target,
                              const OptionalTensor& weight, int64_t reduction) {
  checkBinaryCrossEntropyOperands(self, target, weight, "binary_cross_entropy");
  return reducedOr(emptyLikeIn(self, at::MemoryFormat::Preserve), reduction);
}

Tensor binaryCrossEntropyBackwardMeta(const Tensor& grad_output,
                                      const Tensor& self, const Tensor& target,
                                      const OptionalTensor& weight,
                                      int64_t /*reduction*/) {
  checkBinaryCrossEntropyOperands(self, target, weight,
                                  "binary_cross_entropy_backward");
  TORCH_CHECK(
      grad_output.scalar_type() == self.scalar_type() &&
          at::infer_size(grad_output.sizes(), self.sizes()) == self.sizes(),
      "binary_cross_entropy_backward: left to the CPU kernel");
  return emptyLikeIn(self, at::MemoryFormat::Preserve);
}

}  // namespace

void addActivationAndLossMetaKernels(NativeMetaTable& table) {
  using Binary = Tensor(const Tensor&, const Tensor&);
  using Ternary = Tensor(const Tensor&, const Tensor&, const Tensor&);
  using HuberLoss = Tensor(const Tensor&, const Tensor&, int64_t, double);
  using HuberLossBackwardOut = Tensor&(const Tensor&, const Tensor&,
                                       const Tensor&, int64_t, double, Tensor&);
  using BinaryCrossEntropy =
      Tensor(const Tensor&, const Tensor&, const OptionalTensor&, int64_t);
  using BinaryCrossEntropyBackward =
      Tensor(const Tensor&, const Tensor&, const Tensor&, const OptionalTensor&,
             int64_t);
  table.add<std::tuple<Tensor, Tensor>(const Tensor&)>(
      "aten::log_sigmoid_forward", "", &logSigmoidForwardMeta);
  table.add<Ternary>("aten::log_sigmoid_backward", "", &logSigmoidBackwardMeta);
  table.add<Binary>("aten::_prelu_kernel", "", &preluMeta);
  table.add<std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&,
                                       const Tensor&)>(
      "aten::_prelu_kernel_backward", "", &preluBackwardMeta);
  table.add<HuberLoss>("aten::huber_loss", "", &huberLossMeta);
  table.add<HuberLossBackwardOut>("aten::huber_loss_backward", "out",
                                  &huberLossBackwardOutMeta);
  table.add<Tensor(const Tensor&, const Tensor&, const Tensor&, int64_t)>(
      "aten::mse_loss_backward", "", &mseLossBackwardMeta);
  table.add<Tensor(const Tensor&, const Tensor&, double)>(
      "aten::native_dropout_backward", "", &nativeDropoutBackwardMeta);
  table.add<Tensor(const Tensor&, std::optional<double>)>("aten::logit", "",
                                                          &logitMeta);
  table.add<BinaryCrossEntropy>("aten::binary_cross_entropy", "",
                                &binaryCrossEntropyMeta);
  table.add<BinaryCrossEntropyBackward>("aten::binary_cross_entropy_backward",
                                        "", &binaryCrossEntropyBackwardMeta);
}

}  // namespace mydev
