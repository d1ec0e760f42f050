#include "scalar_conversion_checks.h"

#include <ATen/Dispatch_v2.h>
#include <ATen/OpMathType.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/TypeProperties.h>
#include <c10/core/DefaultDtype.h>

#include <initializer_list>
#include <optional>
#include <string_view>

namespace mydev {
namespace {

using at::ScalarType;
using at::Tensor;
using Arguments = c10::ArrayRef<c10::IValue>;

// A fill value: a Scalar, or a CPU tensor of one element that a device
// kernel reads as a Scalar (cuda's masked_fill does). A value in a
// device tensor is not read here: that would synchronize.
std::optional<c10::Scalar> fillValue(const c10::IValue& value) {
  if (value.isScalar()) {
    return value.toScalar();
  }
  if (value.isTensor()) {
    const Tensor& tensor = value.toTensor();
    if (tensor.dim() == 0 && tensor.device().is_cpu()) {
      return tensor.item();
    }
  }
  return std::nullopt;
}

// The dtype a TensorIterator kernel computes in: its inputs' promoted
// dtype, Scalars taking part as wrapped numbers.
ScalarType promotedType(Arguments args, std::initializer_list<size_t> at) {
  at::native::ResultTypeState state = {};
  for (const size_t i : at) {
    if (args[i].isTensor()) {
      state = at::native::update_result_type_state(args[i].toTensor(), state);
    } else if (args[i].isScalar()) {
      state = at::native::update_result_type_state(args[i].toScalar(), state);
    }
  }
  return at::native::result_type(state);
}

// How a kernel converts a Scalar: to the dtype it computes in (scalar_t),
// or to that dtype's opmath type (float for Half and BFloat16, whose
// kernels compute in float).
enum class ConvertsTo : uint8_t { kComputeType, kOpmathType };

// 0 and 1 (add's alpha and a Linear's beta and alpha, nearly always) fit
// every dtype: no dtype to work out on the hot path.
bool fitsEveryDtype(const c10::IValue& value) {
  return (value.isInt() && (value.toInt() == 0 || value.toInt() == 1)) ||
         (value.isDouble() &&
          (value.toDouble() == 0.0 || value.toDouble() == 1.0)) ||
         value.isBool();
}

void checkConverts(Arguments args, size_t i, ScalarType compute,
                   ConvertsTo to) {
  if (!args[i].isScalar()) {
    return;  // None, or a tensor (the op's other overload)
  }
  checkScalarFits(
      to == ConvertsTo::kOpmathType ? at::toOpMathType(compute) : compute,
      args[i].toScalar());
}

// Which dtypes a kernel computes in. For the others it raises its own
// "not implemented for" first, converting nothing.
bool computesInFloating(ScalarType type) { return at::isFloatingType(type); }
bool computesInAllButBool(ScalarType type) { return type != at::kBool; }
bool computesInRealButBool(ScalarType type) {
  return type != at::kBool && !at::isComplexType(type);
}
bool computesInFloatingOrComplex(ScalarType type) {
  return at::isFloatingType(type) || at::isComplexType(type);
}

// masked_fill(self, mask, value): the value to self's dtype.
void checkMaskedFill(Arguments args) {
  if (args[1].toTensor().scalar_type() != at::kBool) {
    return;  // the CPU kernel refuses the mask first
  }
  if (const auto value = fillValue(args[2])) {
    checkScalarFits(args[0].toTensor().scalar_type(), *value);
  }
}

// clamp(self, min, max), clamp_min(self, min) and clamp_max(self, max): a
// floating self computes in its own dtype, any other in the dtype promoted
// with the bounds.
template <size_t kBounds>
void checkClampBounds(Arguments args) {
  if (!args[1].isScalar() && !(kBounds == 2 && args[2].isScalar())) {
    return;  // bounds given as tensors
  }
  const ScalarType self = args[0].toTensor().scalar_type();
  if (at::isComplexType(self)) {
    return;  // refused first ("clamp is not supported for complex types")
  }
  // The kernel reads each bound as a double first (for NaN), which a
  // complex bound fails.
  for (size_t i = 1; i <= kBounds; ++i) {
    checkConverts(args, i, at::kDouble, ConvertsTo::kComputeType);
  }
  const ScalarType compute = at::isFloatingType(self)
                                 ? self
                                 : (kBounds == 2 ? promotedType(args, {0, 1, 2})
                                                 : promotedType(args, {0, 1}));
  for (size_t i = 1; i <= kBounds; ++i) {
    checkConverts(args, i, compute, ConvertsTo::kComputeType);
  }
}

// hardtanh(self, min_val, max_val): a clamp in self's dtype, whose bounds
// an integer self takes as integers (truncated, not promoted).
void checkHardtanhBounds(Arguments args) {
  const ScalarType self = args[0].toTensor().scalar_type();
  if (self == at::kBool) {
    return;  // refused first
  }
  TORCH_CHECK(!at::isComplexType(self),
              "clamp is not supported for complex types");
  if (!at::isIntegralType(self, /*includeBool=*/false)) {
    checkConverts(args, 1, self, ConvertsTo::kComputeType);
    checkConverts(args, 2, self, ConvertsTo::kComputeType);
    return;
  }
  const int64_t min_val = args[1].toScalar().toLong();
  const int64_t max_val = args[2].toScalar().toLong();
  TORCH_CHECK(self != at::kByte || (min_val >= 0 && max_val >= 0),
              "cannot do hardtanh on an unsigned type with negative limits");
  checkScalarFits(self, min_val);
  checkScalarFits(self, max_val);
}

// rrelu_with_noise(self, noise, lower, upper, training, generator):
// training draws slopes between the bounds in opmath; evaluation is a
// leaky_relu with their mean as its slope.
void checkRreluBounds(Arguments args) {
  const Tensor& self = args[0].toTensor();
  if (!computesInFloating(self.scalar_type()) ||
      self.sizes() != args[1].toTensor().sizes()) {
    return;  // refused first
  }
  if (args[4].toBool()) {
    checkConverts(args, 2, self.scalar_type(), ConvertsTo::kOpmathType);
    checkConverts(args, 3, self.scalar_type(), ConvertsTo::kOpmathType);
  } else {
    const double slope =
        (args[2].toScalar().toDouble() + args[3].toScalar().toDouble()) / 2;
    checkScalarFits(at::toOpMathType(self.scalar_type()), slope);
  }
}

// add, sub and rsub (self, other, alpha): alpha to the promoted dtype.
void checkAlpha(Arguments args) {
  if (fitsEveryDtype(args[2])) {
    return;
  }
  checkConverts(args, 2, promotedType(args, {0, 1}), ConvertsTo::kComputeType);
}

// index_add(self, dim, index, source, alpha)
void checkIndexAddAlpha(Arguments args) {
  checkConverts(args, 4, args[0].toTensor().scalar_type(),
                ConvertsTo::kComputeType);
}

// addcmul(self, tensor1, tensor2, value)
void checkAddcmulValue(Arguments args) {
  const ScalarType compute = promotedType(args, {0, 1, 2});
  if (computesInAllButBool(compute)) {
    checkConverts(args, 3, compute, ConvertsTo::kOpmathType);
  }
}

// addcdiv(self, tensor1, tensor2, value): integer division is refused
// first.
void checkAddcdivValue(Arguments args) {
  const ScalarType compute = promotedType(args, {0, 1, 2});
  if (computesInFloatingOrComplex(compute)) {
    checkConverts(args, 3, compute, ConvertsTo::kOpmathType);
  }
}

// threshold(self, threshold, value): the threshold is compared in opmath,
// the value written in self's dtype.
void checkThreshold(Arguments args) {
  const ScalarType compute = args[0].toTensor().scalar_type();
  if (computesInRealButBool(compute)) {
    checkConverts(args, 1, compute, ConvertsTo::kOpmathType);
    checkConverts(args, 2, compute, ConvertsTo::kComputeType);
  }
}

// An activation's (or its backward's) parameters at `kFirst..kLast`, over
// floating dtypes only; `kTensors` are the tensors that set the dtype.
template <ConvertsTo kTo, size_t kFirst, size_t kLast, size_t... kTensors>
void checkActivationParameters(Arguments args) {
  const ScalarType compute = promotedType(args, {kTensors...});
  if (!computesInFloating(compute)) {
    return;
  }
  for (size_t i = kFirst; i <= kLast; ++i) {
    checkConverts(args, i, compute, kTo);
  }
}

// lerp(self, end, weight) with a Scalar weight
void checkLerpWeight(Arguments args) {
  const ScalarType compute = promotedType(args, {0, 1});
  if (computesInFloatingOrComplex(compute)) {
    checkConverts(args, 2, compute, ConvertsTo::kOpmathType);
  }
}

// scatter(self, dim, index, value[, reduce]) with a Scalar value
void checkScatterValue(Arguments args) {
  checkConverts(args, 3, args[0].toTensor().scalar_type(),
                ConvertsTo::kComputeType);
}

// addmm, baddbmm, addbmm, addmv and addr (self, a, b, beta, alpha)
template <ConvertsTo kTo>
void checkProductScales(Arguments args) {
  if (fitsEveryDtype(args[3]) && fitsEveryDtype(args[4])) {
    return;
  }
  const ScalarType compute = args[1].toTensor().scalar_type();
  if (computesInAllButBool(compute)) {
    checkConverts(args, 3, compute, kTo);
    checkConverts(args, 4, compute, kTo);
  }
}

// pow(self, exponent) with a Scalar exponent: float and double kernels
// take the exponent as a double; integer, Half and BFloat16 kernels
// convert it to their dtype.
void checkPowExponent(Arguments args) {
  if (!args[1].isScalar()) {
    return;
  }
  const ScalarType compute = promotedType(args, {0, 1});
  if ((at::isIntegralType(compute, /*includeBool=*/false)) ||
      compute == at::kHalf || compute == at::kBFloat16) {
    checkConverts(args, 1, compute, ConvertsTo::kComputeType);
  }
}

// linspace(start, end, steps, dtype, ...) and linspace.out(start, end,
// steps, out): the bounds to the result's dtype.
void checkLinspaceBounds(Arguments args) {
  if (!args[0].isScalar() || !args[1].isScalar()) {
    return;
  }
  ScalarType result = c10::get_default_dtype_as_scalartype();
  if (args.back().isTensor()) {
    result = args.back().toTensor().scalar_type();
  } else if (args[3].isInt()) {
    result = static_cast<ScalarType>(args[3].toInt());
  }
  if (computesInAllButBool(result)) {
    checkConverts(args, 0, result, ConvertsTo::kComputeType);
    checkConverts(args, 1, result, ConvertsTo::kComputeType);
  }
}

}  // namespace

void checkScalarFits(ScalarType type, const c10::Scalar& value) {
  switch (type) {
    case at::kByte:
    case at::kChar:
    case at::kShort:
    case at::kInt:
    case at::kLong:
    case at::kFloat:
    case at::kDouble:
    case at::kBool:
    case at::kHalf:
    case at::kBFloat16:
    case at::kComplexHalf:
    case at::kComplexFloat:
    case at::kComplexDouble: break;
    default: return;  // dtypes beyond these convert in their own kernels
  }
  AT_DISPATCH_V2(type, "scalar_conversion",
                 AT_WRAP([&] { (void)value.to<scalar_t>(); }),
                 AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), at::kBool, at::kHalf,
                 at::kBFloat16, at::kComplexHalf);
}

void checkFillValueFits(const at::Tensor& self, const c10::Scalar& value) {
  const ScalarType type = self.scalar_type();
  if (self.numel() == 1) {
    // The CPU fills one element through its own path, which converts a
    // Half or BFloat16 value unchecked.
    if (type != at::kHalf && type != at::kBFloat16) {
      checkScalarFits(type, value);
    }
    return;
  }
  checkScalarFits(type == at::kComplexHalf ? at::kComplexFloat : type, value);
}

CpuKernelCheck scalarConversionCheckFor(const c10::OperatorName& op) {
  constexpr ConvertsTo kCompute = ConvertsTo::kComputeType;
  constexpr ConvertsTo kOpmath = ConvertsTo::kOpmathType;
  std::string_view name = op.name;
  if (name.size() > 1 && name.back() == '_') {
    name.remove_suffix(1);  // the in-place form converts as the others
  }
  if (name == "aten::masked_fill") return &checkMaskedFill;
  if (name == "aten::clamp") return &checkClampBounds<2>;
  if (name == "aten::hardtanh") return &checkHardtanhBounds;
  if (name == "aten::rrelu_with_noise") return &checkRreluBounds;
  if (name == "aten::clamp_min" || name == "aten::clamp_max") {
    return &checkClampBounds<1>;
  }
  if (name == "aten::add" || name == "aten::sub" || name == "aten::rsub") {
    return &checkAlpha;
  }
  if (name == "aten::index_add") return &checkIndexAddAlpha;
  if (name == "aten::addcmul") return &checkAddcmulValue;
  if (name == "aten::addcdiv") return &checkAddcdivValue;
  if (name == "aten::threshold") return &checkThreshold;
  if (name == "aten::leaky_relu") {
    return &checkActivationParameters<kOpmath, 1, 1, 0>;
  }
  if (name == "aten::leaky_relu_backward") {
    return &checkActivationParameters<kOpmath, 2, 2, 0, 1>;
  }
  if (name == "aten::elu") return &checkActivationParameters<kOpmath, 1, 3, 0>;
  if (name == "aten::elu_backward") {
    return &checkActivationParameters<kOpmath, 1, 3, 0, 5>;
  }
  if (name == "aten::softplus") {
    return &checkActivationParameters<kOpmath, 1, 2, 0>;
  }
  if (name == "aten::softplus_backward") {
    return &checkActivationParameters<kOpmath, 2, 3, 0, 1>;
  }
  if (name == "aten::hardtanh_backward") {
    return &checkActivationParameters<kOpmath, 2, 3, 0, 1>;
  }
  if (name == "aten::hardshrink") {
    return &checkActivationParameters<kCompute, 1, 1, 0>;
  }
  if (name == "aten::hardshrink_backward") {
    return &checkActivationParameters<kCompute, 2, 2, 0, 1>;
  }
  if (name == "aten::lerp") return &checkLerpWeight;
  if (name == "aten::scatter") return &checkScatterValue;
  if (name == "aten::addmm" || name == "aten::baddbmm" ||
      name == "aten::addbmm") {
    return &checkProductScales<kOpmath>;
  }
  if (name == "aten::addmv" || name == "aten::addr") {
    return &checkProductScales<kCompute>;
  }
  if (name == "aten::pow") return &checkPowExponent;
  if (name == "aten::linspace") return &checkLinspaceBounds;
  return nullptr;
}

}  // namespace mydev
