// Random ops whose CPU kernels take no generator argument and would silently
// draw from the CPU's default generator; on mydev they draw from the device's
// generator instead (through bernoulli_, which the device-kernel path seeds
// from it).
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/ones_like.h>
#include <torch/library.h>

namespace mydev {
namespace {

// Same contract as ATen's: (output, keep-mask); output is input * mask
// scaled by 1 / (1 - p), all zeros when p == 1.
std::tuple<at::Tensor, at::Tensor> nativeDropout(const at::Tensor& input,
                                                 double p,
                                                 std::optional<bool> train) {
  TORCH_CHECK(p >= 0 && p <= 1,
              "dropout probability has to be between 0 and 1, but got ", p);
  if (input.numel() == 0) {
    return {input, at::empty_like(input, input.options().dtype(at::kBool))};
  }
  if (train.has_value() && !*train) {
    return {input.clone(),
            at::ones_like(input, input.options().dtype(at::kBool))};
  }
  at::Tensor mask = at::empty_like(input).bernoulli_(1 - p).to(at::kBool);
  const double scale = p == 1 ? 0.0 : 1.0 / (1.0 - p);
  at::Tensor output = input.mul(mask).mul_(scale);
  return {output, mask};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_dropout", nativeDropout);
}

}  // namespace mydev
