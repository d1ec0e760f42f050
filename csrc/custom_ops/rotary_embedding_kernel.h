// rotary_embedding kernel bodies (forward and backward), compiled once per
// ISA by kernels_<isa>.cpp. See kernel_table.h for the contract.
#pragma once

#include "fused_kernels.h"
#include "kernel_table.h"

namespace mydev::custom_ops::CPU_CAPABILITY {

// With h = head_dim / 2, a = first half, b = second half of the row:
//   forward  (input x):  out_a = x_a * cos_a - x_b * sin_a
//                        out_b = x_b * cos_b + x_a * sin_b
//   backward (input g):  gx_a  = g_a * cos_a + g_b * sin_b
//                        gx_b  = g_b * cos_b - g_a * sin_a
// One pass over x (or g); the cos/sin rows are small and stay in cache.
template <typename T, typename C, bool kBackward>
void rotaryImpl(const RotaryParams& p) {
  constexpr int L = kLanes<T>;
  constexpr int64_t K = kStep<T>;
  const T* x = static_cast<const T*>(p.x);
  const C* cos = static_cast<const C*>(p.cos);
  const C* sin = static_cast<const C*>(p.sin);
  T* out = static_cast<T*>(p.out);
  const int64_t head_dim = p.head_dim;
  const int64_t half = head_dim / 2;
  const int ndim = p.ndim;

  parallelOverRows(p.rows, head_dim, [&](int64_t begin, int64_t end) {
    // The row's index over row_sizes and its offset in cos/sin, advanced
    // row by row (no division per row).
    int64_t index[RotaryParams::kMaxDims];
    int64_t offset = 0;
    int64_t rest = begin;
    for (int d = ndim - 1; d >= 0; --d) {
      index[d] = rest % p.row_sizes[d];
      rest /= p.row_sizes[d];
      offset += index[d] * p.row_strides[d];
    }
    Vec xa[L], xb[L], ca[L], cb[L], sa[L], sb[L], oa[L], ob[L];
    auto compute = [&] {
      for (int k = 0; k < L; ++k) {
        if constexpr (kBackward) {
          oa[k] = at::vec::fmadd(xb[k], sb[k], xa[k] * ca[k]);
          ob[k] = at::vec::fmsub(xb[k], cb[k], xa[k] * sa[k]);
        } else {
          oa[k] = at::vec::fmsub(xa[k], ca[k], xb[k] * sa[k]);
          ob[k] = at::vec::fmadd(xa[k], sb[k], xb[k] * cb[k]);
        }
      }
    };
    for (int64_t r = begin; r < end; ++r) {
      const T* xr = x + r * head_dim;
      T* outr = out + r * head_dim;
      const C* cr = cos + offset;
      const C* sr = sin + offset;
      int64_t j = 0;
      for (; j + K <= half; j += K) {
        loadFloat<T, L>(xr + j, xa);
        loadFloat<T, L>(xr + half + j, xb);
        loadFloat<C, L>(cr + j, ca);
        loadFloat<C, L>(cr + half + j, cb);
        loadFloat<C, L>(sr + j, sa);
        loadFloat<C, L>(sr + half + j, sb);
        compute();
        storeFloat<T>(outr + j, oa);
        storeFloat<T>(outr + half + j, ob);
      }
      if (j < half) {
        const int64_t n = half - j;
        loadFloat<T, L>(xr + j, xa, n);
        loadFloat<T, L>(xr + half + j, xb, n);
        loadFloat<C, L>(cr + j, ca, n);
        loadFloat<C, L>(cr + half + j, cb, n);
        loadFloat<C, L>(sr + j, sa, n);
        loadFloat<C, L>(sr + half + j, sb, n);
        compute();
        storeFloat<T>(outr + j, oa, n);
        storeFloat<T>(outr + half + j, ob, n);
      }
      // Next row: increment the index, carrying into outer dimensions.
      for (int d = ndim - 1; d >= 0; --d) {
        offset += p.row_strides[d];
        if (++index[d] < p.row_sizes[d]) {
          break;
        }
        offset -= index[d] * p.row_strides[d];
        index[d] = 0;
      }
    }
  });
}

template <typename T, typename C>
struct RotaryForward {
  static void run(const RotaryParams& p) { rotaryImpl<T, C, false>(p); }
};

template <typename T, typename C>
struct RotaryBackward {
  static void run(const RotaryParams& p) { rotaryImpl<T, C, true>(p); }
};

inline void rotaryForward(const RotaryParams& p) {
  dispatchXAndParam<RotaryForward>(p, p.x_type, p.cos_type,
                                   "mydev::rotary_embedding");
}

inline void rotaryBackward(const RotaryParams& p) {
  dispatchXAndParam<RotaryBackward>(p, p.x_type, p.cos_type,
                                    "mydev::rotary_embedding_backward");
}

}  // namespace mydev::custom_ops::CPU_CAPABILITY
