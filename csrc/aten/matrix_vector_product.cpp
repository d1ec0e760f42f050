#include "matrix_vector_product.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>
#include <optional>

#include "../runtime/mydev_runtime.h"
#include "float_dot_products.h"
#include "kernel_launch.h"
#include "memory_overlap.h"

namespace mydev {
namespace {

// Matrix elements per thread at least: a decode step's matrices (up to a
// few MiB) are read by one thread, as MKL's gemv reads them; a thread team
// costs more than it saves below that.
constexpr int64_t kMinElementsPerThread = int64_t{1} << 20;

// What the kernel holds: no tensors, no stack.
struct MatrixVectorCall {
  const void* x;  // per batch, K contiguous floats
  const void* w;  // per batch, the matrix, see `dot_rows`
  void* y;        // per batch, N contiguous floats
  int64_t batches, k, n;
  // True: output j is the dot product of x with K contiguous floats at
  // w + j * stride. False: y is the sum over i of x[i] times N contiguous
  // floats at w + i * stride.
  bool dot_rows;
  int64_t stride;
  // Elements from one batch's x, W and y to the next one's.
  int64_t x_batch_stride, w_batch_stride, y_batch_stride;
  // Added to every batch's y: N floats `bias_stride` apart (0: one value),
  // or none.
  const void* bias;
  int64_t bias_stride;
  // ATen's bmm computes products of fewer than 400 multiply-adds with a
  // plain loop, each output summed in order; so does this kernel then, for
  // the same bits (vector loops sum in another order).
  bool sum_in_order;
};

// ATen's threshold (per batch: contraction size times rows times columns).
constexpr int64_t kBmmPlainLoopBelow = 400;

// y[j, j + count) of batch `b`, on kernel-side addresses.
void computeOutputs(const MatrixVectorCall& call, const float* x,
                    const float* w, float* y, const float* bias, int64_t b,
                    int64_t j, int64_t count) {
  x += b * call.x_batch_stride;
  w += b * call.w_batch_stride;
  y += b * call.y_batch_stride + j;
  if (call.sum_in_order) {
    // W's element (i, j) is at i + j * stride with contiguous columns,
    // i * stride + j with contiguous rows.
    const int64_t i_step = call.dot_rows ? 1 : call.stride;
    const int64_t j_step = call.dot_rows ? call.stride : 1;
    for (int64_t t = 0; t < count; ++t) {
      const float* column = w + (j + t) * j_step;
      float sum = 0.0f;
      for (int64_t i = 0; i < call.k; ++i) sum += x[i] * column[i * i_step];
      y[t] = sum;
    }
  } else if (call.dot_rows) {
    rowDotProducts(w + j * call.stride, call.stride, count, x, call.k, y);
  } else {
    std::fill(y, y + count, 0.0f);
    for (int64_t i = 0; i < call.k; ++i) {
      addScaled(y, x[i], w + i * call.stride + j, count);
    }
  }
  if (bias != nullptr) {
    // What ATen's addmm computes with alpha and beta 1: the product, plus
    // the bias.
    for (int64_t t = 0; t < count; ++t) {
      y[t] += bias[(j + t) * call.bias_stride];
    }
  }
}

void runMatrixVector(const MatrixVectorCall& call) {
  const auto* x = static_cast<const float*>(mydevKernelPointer(call.x));
  const auto* w = static_cast<const float*>(mydevKernelPointer(call.w));
  auto* y = static_cast<float*>(mydevKernelPointer(call.y));
  const auto* bias =
      call.bias == nullptr
          ? nullptr
          : static_cast<const float*>(mydevKernelPointer(call.bias));
  // Each output costs K multiply-adds in either layout; threads split the
  // outputs of all batches.
  const int64_t grain = std::max<int64_t>(1, kMinElementsPerThread / call.k);
  at::parallel_for(0, call.batches * call.n, grain,
                   [&](int64_t begin, int64_t end) {
                     while (begin < end) {
                       const int64_t b = begin / call.n, j = begin % call.n;
                       const int64_t count = std::min(end - begin, call.n - j);
                       computeOutputs(call, x, w, y, bias, b, j, count);
                       begin += count;
                     }
                   });
}

bool isFloatOnDevice(const at::Tensor& t, c10::Device device) {
  return t.defined() && t.device() == device && t.scalar_type() == at::kFloat &&
         !t.is_neg() && !t.is_conj();
}

// The kernel's call for x @ w into `result`, all 2-D (mm) or all 3-D with
// the batch first (bmm), if the product qualifies (see the header).
std::optional<MatrixVectorCall> oneRowProduct(const at::Tensor& x,
                                              const at::Tensor& w,
                                              const at::Tensor& result) {
  const c10::Device device = result.device();
  const int64_t dims = result.dim();
  if (!device.is_privateuseone() || !isFloatOnDevice(x, device) ||
      !isFloatOnDevice(w, device) || !isFloatOnDevice(result, device) ||
      (dims != 2 && dims != 3) || x.dim() != dims || w.dim() != dims) {
    return std::nullopt;
  }
  const int64_t row = dims - 2, column = dims - 1;
  const int64_t batches = dims == 3 ? result.size(0) : 1;
  const int64_t k = x.size(column), n = w.size(column);
  if (batches == 0 || k == 0 || n == 0 || x.size(row) != 1 ||
      w.size(row) != k || result.size(row) != 1 || result.size(column) != n ||
      (dims == 3 && (x.size(0) != batches || w.size(0) != batches ||
                     (batches > 1 && result.stride(0) < n))) ||
      (k > 1 && x.stride(column) != 1) ||
      (n > 1 && result.stride(column) != 1) || elementSpansOverlap(result, x) ||
      elementSpansOverlap(result, w)) {
    return std::nullopt;
  }
  MatrixVectorCall call{};
  call.x = x.const_data_ptr();
  call.w = w.const_data_ptr();
  call.y = result.data_ptr();
  call.batches = batches;
  call.k = k;
  call.n = n;
  if (w.stride(row) == 1 || k == 1) {
    call.dot_rows = true;
    call.stride = w.stride(column);
  } else if (w.stride(column) == 1 || n == 1) {
    call.stride = w.stride(row);
  } else {
    return std::nullopt;
  }
  if (dims == 3) {
    call.x_batch_stride = x.stride(0);
    call.w_batch_stride = w.stride(0);
    call.y_batch_stride = result.stride(0);
    call.sum_in_order = k * n < kBmmPlainLoopBelow;
  }
  return call;
}

bool isOne(const c10::IValue& value) {
  return value.isScalar() && !value.toScalar().isComplex() &&
         value.toScalar().toDouble() == 1.0;
}

// A Linear's bias for the product's call: N contiguous values or one
// value, alpha and beta 1. False if addmm's arguments are anything else.
bool addBias(const at::Tensor& bias, const c10::IValue& beta,
             const c10::IValue& alpha, const at::Tensor& result,
             MatrixVectorCall* call) {
  if (!isOne(beta) || !isOne(alpha) ||
      !isFloatOnDevice(bias, result.device()) || bias.dim() > 2 ||
      elementSpansOverlap(result, bias)) {
    return false;
  }
  if (bias.numel() == 1) {
    call->bias_stride = 0;
  } else if (bias.size(-1) == call->n && bias.stride(-1) == 1 &&
             (bias.dim() == 1 || bias.size(0) == 1)) {
    call->bias_stride = 1;
  } else {
    return false;
  }
  call->bias = bias.const_data_ptr();
  return true;
}

}  // namespace

bool launchMatrixVectorProduct(const c10::OperatorHandle& op,
                               c10::ArrayRef<c10::IValue> device_args,
                               const at::Tensor& result) {
  const c10::OperatorName& name = op.operator_name();
  if (!name.overload_name.empty() && name.overload_name != "out") {
    return false;
  }
  const bool with_bias = name.name == "aten::addmm";
  if (name.name != "aten::mm" && name.name != "aten::bmm" && !with_bias) {
    return false;
  }
  // addmm(bias, mat1, mat2, beta, alpha); mm and bmm(mat1, mat2).
  const size_t first = with_bias ? 1 : 0;
  if (device_args.size() < first + 2 || !device_args[first].isTensor() ||
      !device_args[first + 1].isTensor() ||
      (with_bias && !device_args[0].isTensor())) {
    return false;
  }
  std::optional<MatrixVectorCall> call = oneRowProduct(
      device_args[first].toTensor(), device_args[first + 1].toTensor(), result);
  if (!call.has_value() || (name.name == "aten::bmm") != (result.dim() == 3) ||
      (with_bias && !addBias(device_args[0].toTensor(), device_args[3],
                             device_args[4], result, &*call))) {
    return false;
  }
  launchKernel("matrix_vector_product",
               [call = *call] { runMatrixVector(call); });
  return true;
}

}  // namespace mydev
