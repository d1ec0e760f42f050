#include "matrix_vector_product.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>

#include "../runtime/mydev_runtime.h"
#include "float_dot_products.h"
#include "kernel_launch.h"

namespace mydev {
namespace {

// Matrix elements per thread at least: a decode step's matrices (up to a
// few MiB) are read by one thread, as MKL's gemv reads them; a thread team
// costs more than it saves below that.
constexpr int64_t kMinElementsPerThread = int64_t{1} << 20;

// What the kernel holds: no tensors, no stack.
struct MatrixVectorCall {
  const void* x;  // K contiguous floats
  const void* w;  // the matrix, see `dot_rows`
  void* y;        // N contiguous floats
  int64_t k, n;
  // True: output j is the dot product of x with K contiguous floats at
  // w + j * stride. False: y is the sum over i of x[i] times N contiguous
  // floats at w + i * stride.
  bool dot_rows;
  int64_t stride;
};

void runMatrixVector(const MatrixVectorCall& call) {
  const auto* x = static_cast<const float*>(mydevKernelPointer(call.x));
  const auto* w = static_cast<const float*>(mydevKernelPointer(call.w));
  auto* y = static_cast<float*>(mydevKernelPointer(call.y));
  // Each output costs K multiply-adds in either layout.
  const int64_t grain = std::max<int64_t>(1, kMinElementsPerThread / call.k);
  at::parallel_for(0, call.n, grain, [&](int64_t begin, int64_t end) {
    if (call.dot_rows) {
      rowDotProducts(w + begin * call.stride, call.stride, end - begin, x,
                     call.k, y + begin);
      return;
    }
    std::fill(y + begin, y + end, 0.0f);
    for (int64_t i = 0; i < call.k; ++i) {
      addScaled(y + begin, x[i], w + i * call.stride + begin, end - begin);
    }
  });
}

bool isFloatOnDevice(const at::Tensor& t) {
  return t.defined() && t.device().is_privateuseone() &&
         t.scalar_type() == at::kFloat && t.dim() == 2 && !t.is_neg() &&
         !t.is_conj();
}

// The bytes a tensor's elements span, as device addresses (compared as
// numbers, never dereferenced).
struct Span {
  uintptr_t begin, end;
};
Span spanOf(const at::Tensor& t) {
  int64_t last = 0;
  for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
  const auto begin = reinterpret_cast<uintptr_t>(t.const_data_ptr());
  return {begin, begin + static_cast<uintptr_t>((last + 1) * sizeof(float))};
}
bool overlap(const at::Tensor& a, const at::Tensor& b) {
  const Span sa = spanOf(a), sb = spanOf(b);
  return sa.begin < sb.end && sb.begin < sa.end;
}

}  // namespace

bool launchMatrixVectorProduct(const c10::OperatorHandle& op,
                               c10::ArrayRef<c10::IValue> device_args,
                               const at::Tensor& result) {
  const c10::OperatorName& name = op.operator_name();
  if (name.name != "aten::mm" ||
      (!name.overload_name.empty() && name.overload_name != "out") ||
      device_args.size() < 2 || !device_args[0].isTensor() ||
      !device_args[1].isTensor()) {
    return false;
  }
  const at::Tensor& x = device_args[0].toTensor();
  const at::Tensor& w = device_args[1].toTensor();
  if (!isFloatOnDevice(x) || !isFloatOnDevice(w) || !isFloatOnDevice(result) ||
      x.device() != w.device() || x.size(0) != 1) {
    return false;
  }
  const int64_t k = x.size(1), n = w.size(1);
  if (k == 0 || n == 0 || w.size(0) != k || result.size(0) != 1 ||
      result.size(1) != n || (k > 1 && x.stride(1) != 1) ||
      (n > 1 && result.stride(1) != 1) || overlap(result, x) ||
      overlap(result, w)) {
    return false;
  }
  MatrixVectorCall call{x.const_data_ptr(),
                        w.const_data_ptr(),
                        result.data_ptr(),
                        k,
                        n,
                        false,
                        0};
  if (w.stride(0) == 1 || k == 1) {
    call.dot_rows = true;
    call.stride = w.stride(1);
  } else if (w.stride(1) == 1 || n == 1) {
    call.stride = w.stride(0);
  } else {
    return false;
  }
  launchKernel("matrix_vector_product", [call] { runMatrixVector(call); });
  return true;
}

}  // namespace mydev
