// torch.fft on float16 and complex32 inputs, as on cuda.
//
// ATen's FFT operators (fft_fft, fft_rfft2, fft_ihfftn, ...) are composites
// that refuse float16 and complex32 ("Unsupported dtype Half") before any
// kernel runs, unless the device is cuda, xpu or meta. mydev computes them
// like beyond_cpu_dtypes.h does for kernels: in float32/complex64 (device
// ops, autograd included), results stored as float16/complex32. Other
// dtypes take the composite unchanged.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <vector>

#include "ivalue_tensors.h"
#include "op_schema.h"

namespace mydev {
namespace {

using torch::jit::Stack;

bool isHalfWidth(at::ScalarType type) {
  return type == at::kHalf || type == at::ScalarType::ComplexHalf;
}

at::ScalarType widened(at::ScalarType type) {
  return type == at::kHalf ? at::kFloat : at::kComplexFloat;
}

at::ScalarType narrowed(at::ScalarType type) {
  return type == at::kFloat ? at::kHalf : at::ScalarType::ComplexHalf;
}

void fftInHalfPrecision(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                        Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  const size_t n_args = schema.arguments().size();
  const size_t base = stack->size() - n_args;
  bool half_width = false;
  for (size_t i = base; i < stack->size(); ++i) {
    forEachTensor((*stack)[i], [&](const at::Tensor& t) {
      half_width = half_width || isHalfWidth(t.scalar_type());
    });
  }
  // The composite kernel (what the CPU key holds for these ops); its ops
  // dispatch again, on mydev and through autograd.
  const c10::DispatchKeySet composite(c10::DispatchKey::CPU);
  if (!half_width) {
    op.redispatchBoxed(composite, stack);
    return;
  }
  const std::vector<c10::IValue> originals(stack->begin() + base, stack->end());
  std::vector<std::pair<at::Tensor, at::Tensor>> outs;  // (own dtype, wider)
  for (size_t i = 0; i < n_args; ++i) {
    (*stack)[base + i] = mapTensors(originals[i], [&](const at::Tensor& t) {
      if (!isHalfWidth(t.scalar_type())) return t;
      at::Tensor wide = t.to(widened(t.scalar_type()));
      if (schema.arguments()[i].is_out()) outs.emplace_back(t, wide);
      return wide;
    });
  }
  op.redispatchBoxed(composite, stack);
  for (const auto& [own, wide] : outs) {
    if (own.sizes() != wide.sizes()) own.resize_(wide.sizes());
    own.copy_(wide);
  }
  for (size_t r = 0; r < schema.returns().size(); ++r) {
    c10::IValue& result = (*stack)[stack->size() - schema.returns().size() + r];
    const std::optional<size_t> aliased = aliasedArgument(schema, r);
    result = aliased.has_value() ? originals[*aliased]
                                 : c10::IValue(result.toTensor().to(narrowed(
                                       result.toTensor().scalar_type())));
  }
}

constexpr const char* kFftOps[] = {
    "fft_fft",    "fft_ifft",   "fft_rfft",  "fft_irfft", "fft_hfft",
    "fft_ihfft",  "fft_fft2",   "fft_ifft2", "fft_rfft2", "fft_irfft2",
    "fft_hfft2",  "fft_ihfft2", "fft_fftn",  "fft_ifftn", "fft_rfftn",
    "fft_irfftn", "fft_hfftn",  "fft_ihfftn"};

void registerFftOps(torch::Library& m) {
  for (const char* name : kFftOps) {
    m.impl(name,
           torch::CppFunction::makeFromBoxedFunction<&fftInHalfPrecision>());
    const std::string out = std::string(name) + ".out";
    m.impl(out.c_str(),
           torch::CppFunction::makeFromBoxedFunction<&fftInHalfPrecision>());
  }
}

}  // namespace

// Both keys, as a composite kernel would be: with autograd and below it
// (inference mode).
TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) { registerFftOps(m); }
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { registerFftOps(m); }

}  // namespace mydev
