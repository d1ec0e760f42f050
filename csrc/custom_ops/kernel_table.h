// The fused kernels' interface: what a kernel receives (raw pointers into
// device memory, sizes and dtypes, as a real device kernel would) and the
// table of kernels compiled for the host's vector ISA.
//
// The kernel bodies (*_kernel.h) are compiled once per ISA
// (kernels_default.cpp, kernels_avx2.cpp, kernels_avx512.cpp, as ATen compiles
// its CPU kernels) and kernelTable() picks the table of core/vector_isa.h's
// choice, ATen's CPU capability (ATEN_CPU_CAPABILITY=default|avx2|avx512
// overrides it, as for ATen). Nothing here includes the vector headers: this
// file is ISA-neutral.
#pragma once

#include <c10/core/ScalarType.h>

#include <algorithm>
#include <cstdint>

namespace mydev::custom_ops {

// y = x * rsqrt(mean(x^2, -1) + eps) * weight over `rows` rows of `hidden`
// contiguous elements. x and out have x_type (float, bfloat16 or half);
// weight has weight_type (x_type or float). Math in float32.
struct RmsNormForwardParams {
  const void* x;
  const void* weight;
  void* out;
  int64_t rows;
  int64_t hidden;
  float eps;
  c10::ScalarType x_type;
  c10::ScalarType weight_type;
};

// grad_x (x_type) and grad_weight (weight_type) of rms_norm. grad_weight is a
// sum over rows: each chunk of rows (rmsNormGradWeightChunks) accumulates a
// float32 partial row in `workspace` ([chunks, hidden] float32), then the
// partials are summed in chunk order, so the result depends on the shape
// only, not on the thread count or the schedule.
struct RmsNormBackwardParams {
  const void* grad_out;
  const void* x;
  const void* weight;
  void* grad_x;
  void* grad_weight;
  float* workspace;
  int64_t rows;
  int64_t hidden;
  int64_t chunks;
  float eps;
  c10::ScalarType x_type;
  c10::ScalarType weight_type;
};

// The row chunks of rms_norm's grad_weight reduction: at most 256 chunks of at
// least 8 rows, a function of the row count alone (determinism).
inline int64_t rmsNormGradWeightChunks(int64_t rows) {
  if (rows <= 0) {
    return 0;
  }
  const int64_t rows_per_chunk = std::max<int64_t>(8, (rows + 255) / 256);
  return (rows + rows_per_chunk - 1) / rows_per_chunk;
}

// out = silu(gate) * up over n contiguous elements of one dtype.
struct SwigluForwardParams {
  const void* gate;
  const void* up;
  void* out;
  int64_t n;
  c10::ScalarType type;
};

// grad_gate = grad * up * s * (1 + gate * (1 - s)), grad_up = grad * silu(gate)
// with s = sigmoid(gate).
struct SwigluBackwardParams {
  const void* grad_out;
  const void* gate;
  const void* up;
  void* grad_gate;
  void* grad_up;
  int64_t n;
  c10::ScalarType type;
};

// Rotary embedding with the rotate-half convention over `rows` contiguous
// rows of head_dim elements (x viewed as [rows, head_dim]).
//   forward:  out = x * cos + rotate_half(x) * sin,  rotate_half(x) = cat(-x2,
//   x1) backward: grad_x = g * cos + rotate_half^T(g * sin),
//             rotate_half^T(y) = cat(y2, -y1)
// The cos/sin row of x's row r: its row index r is split over row_sizes
// (x's leading dims, coalesced, outermost first), and the row's element offset
// in cos and sin is the dot product of that index with row_strides (0 where
// cos/sin broadcast). cos and sin share that layout, with unit stride along
// head_dim; they have x_type or float.
struct RotaryParams {
  static constexpr int kMaxDims = 8;
  const void* x;  // the gradient for backward
  const void* cos;
  const void* sin;
  void* out;
  int64_t rows;
  int64_t head_dim;
  int ndim;
  int64_t row_sizes[kMaxDims];
  int64_t row_strides[kMaxDims];
  c10::ScalarType x_type;
  c10::ScalarType cos_type;
};

// One ISA's kernels.
struct KernelTable {
  const char* isa;
  void (*rms_norm_forward)(const RmsNormForwardParams&);
  void (*rms_norm_backward)(const RmsNormBackwardParams&);
  void (*swiglu_forward)(const SwigluForwardParams&);
  void (*swiglu_backward)(const SwigluBackwardParams&);
  void (*rotary_forward)(const RotaryParams&);
  void (*rotary_backward)(const RotaryParams&);
};

// Defined by kernels_<isa>.cpp (the AVX ones are empty off x86-64).
namespace DEFAULT {
KernelTable isaKernelTable();
}
namespace AVX2 {
KernelTable isaKernelTable();
}
namespace AVX512 {
KernelTable isaKernelTable();
}

// The kernels for ATen's CPU capability on this host (chosen once).
const KernelTable& kernelTable();

// Raised by a kernel given dtypes outside its contract (the host functions
// check first, so this is a safety net). Out of line: the ISA files format
// no error messages themselves (see isa_prelude.h).
[[noreturn]] void throwUnsupportedDtypes(const char* op, c10::ScalarType x_type,
                                         c10::ScalarType param_type);

}  // namespace mydev::custom_ops
