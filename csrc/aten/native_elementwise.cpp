#include "native_elementwise.h"

#include <ATen/Parallel.h>
#include <ATen/TensorIterator.h>
#include <ATen/core/Tensor.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>

#include "../core/vector_isa.h"
#include "../runtime/mydev_runtime.h"
#include "kernel_launch.h"
#include "op_schema.h"

namespace mydev {
namespace {

// Square is pow(x, 2), which ATen computes as x * x: a pow call whose
// exponent (read at launch) is another keeps ATen's kernel.
enum class Arithmetic { Add, Sub, Mul, Div, Neg, Relu, Rsqrt, Square };

bool isUnary(Arithmetic op) {
  return op != Arithmetic::Add && op != Arithmetic::Sub &&
         op != Arithmetic::Mul && op != Arithmetic::Div;
}

// Ops defined here for floating dtypes only: their integer forms promote
// (rsqrt) or run ATen's integer power loop.
bool floatingOnly(Arithmetic op) {
  return op == Arithmetic::Rsqrt || op == Arithmetic::Square;
}

// The overloads that compute `self op other` (or `op self`), functional,
// in-place and out=; div's rounding modes are not true division and stay
// with ATen.
std::optional<Arithmetic> arithmeticOf(const c10::OperatorHandle& op) {
  const c10::OperatorName& name = op.operator_name();
  static const std::unordered_map<std::string, Arithmetic> binary = {
      {"aten::add", Arithmetic::Add}, {"aten::add_", Arithmetic::Add},
      {"aten::sub", Arithmetic::Sub}, {"aten::sub_", Arithmetic::Sub},
      {"aten::mul", Arithmetic::Mul}, {"aten::mul_", Arithmetic::Mul},
      {"aten::div", Arithmetic::Div}, {"aten::div_", Arithmetic::Div}};
  static const std::unordered_map<std::string, Arithmetic> unary = {
      {"aten::neg", Arithmetic::Neg},     {"aten::neg_", Arithmetic::Neg},
      {"aten::relu", Arithmetic::Relu},   {"aten::relu_", Arithmetic::Relu},
      {"aten::rsqrt", Arithmetic::Rsqrt}, {"aten::rsqrt_", Arithmetic::Rsqrt}};
  const std::string& overload = name.overload_name;
  // pow(Tensor self, Scalar exponent), functional, out= and in-place.
  if ((name.name == "aten::pow" &&
       (overload == "Tensor_Scalar" || overload == "Tensor_Scalar_out")) ||
      (name.name == "aten::pow_" && overload == "Scalar")) {
    return Arithmetic::Square;
  }
  if (overload == "Tensor" || overload == "Scalar" || overload == "out" ||
      overload == "Scalar_out") {
    const auto found = binary.find(name.name);
    if (found != binary.end()) return found->second;
  }
  if (overload.empty() || overload == "out") {
    const auto found = unary.find(name.name);
    if (found != unary.end()) return found->second;
  }
  return std::nullopt;
}

// A scalar operand as the host holds it, converted to the result's dtype
// with a plain cast, as TensorIterator converts a CPU scalar to the common
// dtype (a double scalar times a float tensor computes in float).
struct HostScalar {
  bool floating = false;
  double d = 0;
  int64_t i = 0;
  template <typename T>
  T as() const {
    return floating ? static_cast<T>(d) : static_cast<T>(i);
  }
};

// One operand: a device address, or a host scalar (address null).
struct Operand {
  const void* address = nullptr;
  HostScalar scalar;
};

// The value of a scalar argument: a Scalar, or a wrapped number (the 0-dim
// CPU tensor Python makes of `x * 2.0`, never seen by the user, so reading
// it now rather than when the kernel runs changes nothing). Other 0-dim CPU
// tensors may change after the launch (or between replays) and stay with
// ATen, which reads them when the kernel runs.
std::optional<HostScalar> hostScalarOf(const c10::IValue& value) {
  if (value.isDouble()) return HostScalar{true, value.toDouble(), 0};
  if (value.isInt()) return HostScalar{false, 0, value.toInt()};
  if (value.isBool()) return HostScalar{false, 0, value.toBool() ? 1 : 0};
  if (!value.isTensor()) return std::nullopt;
  const at::Tensor& t = value.toTensor();
  if (!t.defined() || !t.is_cpu() ||
      !t.unsafeGetTensorImpl()->is_wrapped_number()) {
    return std::nullopt;
  }
  switch (t.scalar_type()) {  // host memory: a CPU tensor
    case at::kDouble: return HostScalar{true, *t.const_data_ptr<double>(), 0};
    case at::kLong: return HostScalar{false, 0, *t.const_data_ptr<int64_t>()};
    case at::kBool: return HostScalar{false, 0, *t.const_data_ptr<bool>()};
    default: return std::nullopt;  // complex
  }
}

// A device tensor laid out exactly as `result` and of its dtype (so one
// linear walk over both visits matching elements) that `result` either is
// or does not overlap: with partial overlap the walk's direction would
// decide the values, so such calls keep ATen's kernel and its behaviour.
bool matchesResult(const at::Tensor& t, const at::Tensor& result) {
  if (!t.defined() || !t.device().is_privateuseone() ||
      t.scalar_type() != result.scalar_type() || t.is_neg() || t.is_conj() ||
      t.sizes() != result.sizes() || t.strides() != result.strides()) {
    return false;
  }
  // Device addresses compared as numbers, never dereferenced.
  const auto begin = reinterpret_cast<uintptr_t>(t.const_data_ptr());
  const auto result_begin =
      reinterpret_cast<uintptr_t>(result.const_data_ptr());
  const uintptr_t extent = result.numel() * result.element_size();
  return begin == result_begin || begin >= result_begin + extent ||
         result_begin >= begin + extent;
}

std::optional<Operand> operandOf(const c10::IValue& value,
                                 const at::Tensor& result) {
  if (std::optional<HostScalar> scalar = hostScalarOf(value)) {
    return Operand{nullptr, *scalar};
  }
  if (value.isTensor() && matchesResult(value.toTensor(), result)) {
    return Operand{value.toTensor().const_data_ptr(), {}};
  }
  return std::nullopt;
}

// Only alpha == 1: ATen computes `self + alpha * other` with a fused
// multiply-add where the CPU has one and without where it does not, so any
// other alpha is bit-identical to it only on some machines.
bool isOne(const c10::IValue& alpha) {
  return (alpha.isInt() && alpha.toInt() == 1) ||
         (alpha.isDouble() && alpha.toDouble() == 1.0);
}

bool supportedDtype(at::ScalarType dtype) {
  return dtype == at::kFloat || dtype == at::kDouble || dtype == at::kInt ||
         dtype == at::kLong;
}

// What a kernel holds: no tensors, no stack.
struct ElementwiseCall {
  Arithmetic op;
  at::ScalarType dtype;
  Operand a, b;  // b unused by unary ops
  void* out;
  int64_t numel;
};

// The type integer arithmetic is computed in (floats are themselves).
template <typename T, typename = void>
struct Unsigned {
  using type = T;
};
template <typename T>
struct Unsigned<T, std::enable_if_t<std::is_integral_v<T>>> {
  using type = std::make_unsigned_t<T>;
};

// Plain loops the compiler vectorizes; `f` is the element operation, so the
// order of operations per element is exactly ATen's. Large tensors are
// split across ATen's threads, in chunks of TensorIterator's grain, as its
// own kernels are.
template <typename Body>
void forRange(int64_t numel, const Body& body) {
  if (numel <= at::internal::GRAIN_SIZE) {
    body(0, numel);
  } else {
    at::parallel_for(0, numel, at::internal::GRAIN_SIZE, body);
  }
}

template <typename T, typename F>
void binaryLoop(const ElementwiseCall& call, F f) {
  T* out = static_cast<T*>(mydevKernelPointer(call.out));
  if (call.a.address == nullptr) {
    const T x = call.a.scalar.as<T>();
    const T* b = static_cast<const T*>(mydevKernelPointer(call.b.address));
    forRange(call.numel, [=](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) out[i] = f(x, b[i]);
    });
  } else if (call.b.address == nullptr) {
    const T* a = static_cast<const T*>(mydevKernelPointer(call.a.address));
    const T y = call.b.scalar.as<T>();
    forRange(call.numel, [=](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) out[i] = f(a[i], y);
    });
  } else {
    const T* a = static_cast<const T*>(mydevKernelPointer(call.a.address));
    const T* b = static_cast<const T*>(mydevKernelPointer(call.b.address));
    forRange(call.numel, [=](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) out[i] = f(a[i], b[i]);
    });
  }
}

template <typename T, typename F>
void unaryLoop(const ElementwiseCall& call, F f) {
  T* out = static_cast<T*>(mydevKernelPointer(call.out));
  const T* a = static_cast<const T*>(mydevKernelPointer(call.a.address));
  forRange(call.numel, [=](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = f(a[i]);
  });
}

// The element operations are lambdas, not function pointers: a pointer
// called per element was not inlined and the loop not vectorized (~8x
// slower per replayed 4096-float kernel). Integers wrap on overflow as ATen's
// do in practice, computed unsigned so that the wrap is defined behaviour.
template <typename T>
void run(const ElementwiseCall& call) {
  using U = typename Unsigned<T>::type;
  switch (call.op) {
    case Arithmetic::Add:
      return binaryLoop<T>(call, [](T x, T y) { return T(U(x) + U(y)); });
    case Arithmetic::Sub:
      return binaryLoop<T>(call, [](T x, T y) { return T(U(x) - U(y)); });
    case Arithmetic::Mul:
      return binaryLoop<T>(call, [](T x, T y) { return T(U(x) * U(y)); });
    case Arithmetic::Div:
      if constexpr (std::is_floating_point_v<T>) {
        return binaryLoop<T>(call, [](T x, T y) { return x / y; });
      }
      break;  // true division of integers has a floating result: not here
    case Arithmetic::Neg:
      // A float's sign flips (-0.0, NaN's sign bit); 0 - x would not.
      return unaryLoop<T>(call, [](T x) {
        if constexpr (std::is_floating_point_v<T>) {
          return -x;
        } else {
          return T(U(0) - U(x));
        }
      });
    case Arithmetic::Relu:
      // ATen's clamp_min(self, 0): NaN and -0.0 pass through.
      return unaryLoop<T>(call, [](T x) { return x < T(0) ? T(0) : x; });
    case Arithmetic::Rsqrt:
      // 1 divided by a correctly rounded square root, as ATen's scalar and
      // vector loops compute it (a negative input's NaN included). sqrt is
      // not here: ATen's gives a negative input a NaN of the other sign
      // than the processor's square root.
      if constexpr (std::is_floating_point_v<T>) {
        return unaryLoop<T>(call, [](T x) { return T(1) / std::sqrt(x); });
      }
      break;
    case Arithmetic::Square:
      if constexpr (std::is_floating_point_v<T>) {
        return unaryLoop<T>(call, [](T x) { return x * x; });
      }
      break;
  }
  TORCH_INTERNAL_ASSERT(false, "native elementwise kernel without a loop");
}

void runElementwise(const ElementwiseCall& call) {
  switch (call.dtype) {
    case at::kFloat: return run<float>(call);
    case at::kDouble: return run<double>(call);
    case at::kInt: return run<int32_t>(call);
    case at::kLong: return run<int64_t>(call);
    default: TORCH_INTERNAL_ASSERT(false, "native elementwise: bad dtype");
  }
}

// The build targets the x86-64 baseline (SSE2); ATen's own kernels run on
// the widest vector ISA the CPU has. A 4096-float loop is nearly all of a
// replayed kernel's time (the replay itself costs ~20 ns per kernel), so
// the loops are compiled for AVX2 as well: `flatten` inlines the whole call
// tree into this one function, which compiles it for AVX2. Each element is
// still one IEEE operation, so the results are the same bits on either ISA.
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"), flatten)) void runElementwiseAvx2(
    const ElementwiseCall& call) {
  runElementwise(call);
}
#endif

void runBestElementwise(const ElementwiseCall& call) {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool avx2 = vectorIsa() != VectorIsa::Default;
  if (avx2) return runElementwiseAvx2(call);
#endif
  runElementwise(call);
}

// A debugging count (native_elementwise_launches), bumped at every launch.
// Not a locked add: on x86 that is a full barrier, which waited for the
// launch's pending stores (most of this function's own perf samples); two
// threads launching at the same instant may count one launch. On a cache
// line of its own (the struct fills it), away from runBestElementwise's
// statics, which the executor reads at every kernel.
struct alignas(64) LaunchCount {
  std::atomic<int64_t> value{0};
} launches;

}  // namespace

bool launchNativeElementwise(const c10::OperatorHandle& op,
                             c10::ArrayRef<c10::IValue> device_args,
                             const at::Tensor& result) {
  const std::optional<Arithmetic>& fact = operatorFact<&arithmeticOf>(op);
  if (!fact.has_value() || !result.defined() ||
      !result.device().is_privateuseone() ||
      !supportedDtype(result.scalar_type()) ||
      ((*fact == Arithmetic::Div || floatingOnly(*fact)) &&
       !at::isFloatingType(result.scalar_type())) ||
      result.is_neg() || result.is_conj() ||
      !result.is_non_overlapping_and_dense()) {
    return false;
  }
  const Arithmetic arithmetic = *fact;
  if (arithmetic == Arithmetic::Square) {
    // Only the exponent ATen turns into a product; the others call pow.
    const c10::IValue* exponent =
        device_args.size() >= 2 ? &device_args[1] : nullptr;
    if (exponent == nullptr ||
        !((exponent->isInt() && exponent->toInt() == 2) ||
          (exponent->isDouble() && exponent->toDouble() == 2.0))) {
      return false;
    }
  }
  ElementwiseCall call{arithmetic, result.scalar_type(), {},
                       {},         result.data_ptr(),    result.numel()};
  if (isUnary(arithmetic)) {
    if (device_args.empty() || !device_args[0].isTensor() ||
        !matchesResult(device_args[0].toTensor(), result)) {
      return false;
    }
    call.a = Operand{device_args[0].toTensor().const_data_ptr(), {}};
  } else {
    // add/sub: (self, other, alpha); mul/div: (self, other).
    const bool has_alpha =
        arithmetic == Arithmetic::Add || arithmetic == Arithmetic::Sub;
    if (device_args.size() < (has_alpha ? 3u : 2u) ||
        (has_alpha && !isOne(device_args[2]))) {
      return false;
    }
    std::optional<Operand> a = operandOf(device_args[0], result);
    std::optional<Operand> b = operandOf(device_args[1], result);
    if (!a.has_value() || !b.has_value() ||
        (a->address == nullptr && b->address == nullptr)) {
      return false;
    }
    // An integer result with a floating scalar: the op promotes (its Meta
    // kernel made the result floating or refused), never reaches here; kept
    // out in case a call ever does.
    const HostScalar& scalar = a->address == nullptr ? a->scalar : b->scalar;
    if (scalar.floating && !at::isFloatingType(result.scalar_type())) {
      return false;
    }
    call.a = *a;
    call.b = *b;
  }
  launches.value.store(launches.value.load(std::memory_order_relaxed) + 1,
                       std::memory_order_relaxed);
  // The kernel keeps the op's name: profiles and errors quote it.
  launchKernel(op.operator_name().name.c_str(),
               [call] { runBestElementwise(call); });
  return true;
}

int64_t nativeElementwiseLaunches() {
  return launches.value.load(std::memory_order_relaxed);
}

void resetNativeElementwiseLaunches() {
  launches.value.store(0, std::memory_order_relaxed);
}

}  // namespace mydev
