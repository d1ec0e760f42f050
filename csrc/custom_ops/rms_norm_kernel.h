// rms_norm kernel bodies (forward and backward), compiled once per ISA by
// kernels_<isa>.cpp. See kernel_table.h for the contract.
#pragma once

#include <cmath>

#include "fused_kernels.h"
#include "kernel_table.h"

namespace mydev::custom_ops::CPU_CAPABILITY {

// Per row: sum of squares, then out = x * rstd * w. The row (16 KiB at
// hidden 4096 in float32) is still in cache for the second pass, so x is
// read from memory once.
template <typename T, typename W>
void rmsNormForwardImpl(const RmsNormForwardParams& p) {
  constexpr int L = kLanes<T>;
  constexpr int64_t K = kStep<T>;
  const T* x = static_cast<const T*>(p.x);
  const W* weight = static_cast<const W*>(p.weight);
  T* out = static_cast<T*>(p.out);
  const int64_t hidden = p.hidden;
  const float eps = p.eps;
  parallelOverRows(p.rows, hidden, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T* xr = x + r * hidden;
      T* outr = out + r * hidden;
      Vec acc[L];
      for (int k = 0; k < L; ++k) acc[k] = Vec(0.0f);
      Vec xv[L];
      int64_t i = 0;
      for (; i + K <= hidden; i += K) {
        loadFloat<T, L>(xr + i, xv);
        for (int k = 0; k < L; ++k)
          acc[k] = at::vec::fmadd(xv[k], xv[k], acc[k]);
      }
      if (i < hidden) {
        loadFloat<T, L>(xr + i, xv, hidden - i);
        for (int k = 0; k < L; ++k)
          acc[k] = at::vec::fmadd(xv[k], xv[k], acc[k]);
      }
      const float rstd =
          1.0f /
          std::sqrt(horizontalSum(acc) / static_cast<float>(hidden) + eps);
      const Vec rstd_v(rstd);
      Vec wv[L];
      for (i = 0; i + K <= hidden; i += K) {
        loadFloat<T, L>(xr + i, xv);
        loadFloat<W, L>(weight + i, wv);
        for (int k = 0; k < L; ++k) xv[k] = xv[k] * rstd_v * wv[k];
        storeFloat<T>(outr + i, xv);
      }
      if (i < hidden) {
        loadFloat<T, L>(xr + i, xv, hidden - i);
        loadFloat<W, L>(weight + i, wv, hidden - i);
        for (int k = 0; k < L; ++k) xv[k] = xv[k] * rstd_v * wv[k];
        storeFloat<T>(outr + i, xv, hidden - i);
      }
    }
  });
}

// With g = grad_out, w = weight, r = rstd of the row, n = hidden:
//   grad_x = r * g * w - x * (r^3 / n) * sum(g * w * x)
//   grad_w = sum over rows of g * x * r
// Pass 1 over a row computes sum(x^2) and sum(g * w * x); pass 2 writes
// grad_x and adds g * x * r to the chunk's float32 partial of grad_w. Then
// the partials are summed per column in chunk order.
template <typename T, typename W>
void rmsNormBackwardImpl(const RmsNormBackwardParams& p) {
  constexpr int L = kLanes<T>;
  constexpr int64_t K = kStep<T>;
  const T* grad_out = static_cast<const T*>(p.grad_out);
  const T* x = static_cast<const T*>(p.x);
  const W* weight = static_cast<const W*>(p.weight);
  T* grad_x = static_cast<T*>(p.grad_x);
  W* grad_weight = static_cast<W*>(p.grad_weight);
  float* workspace = p.workspace;
  const int64_t hidden = p.hidden;
  const int64_t rows = p.rows;
  const int64_t chunks = p.chunks;
  const float eps = p.eps;
  const int64_t rows_per_chunk = chunks > 0 ? (rows + chunks - 1) / chunks : 0;

  parallelFor(0, chunks, 1, [&](int64_t chunk_begin, int64_t chunk_end) {
    for (int64_t c = chunk_begin; c < chunk_end; ++c) {
      float* partial = workspace + c * hidden;
      std::fill(partial, partial + hidden, 0.0f);
      const int64_t row_end = std::min(rows, (c + 1) * rows_per_chunk);
      for (int64_t r = c * rows_per_chunk; r < row_end; ++r) {
        const T* xr = x + r * hidden;
        const T* gr = grad_out + r * hidden;
        T* gxr = grad_x + r * hidden;
        Vec sum_sq[L], sum_gwx[L], xv[L], gv[L], wv[L];
        for (int k = 0; k < L; ++k) sum_sq[k] = sum_gwx[k] = Vec(0.0f);
        int64_t i = 0;
        auto accumulate = [&] {
          for (int k = 0; k < L; ++k) {
            sum_sq[k] = at::vec::fmadd(xv[k], xv[k], sum_sq[k]);
            sum_gwx[k] = at::vec::fmadd(gv[k] * wv[k], xv[k], sum_gwx[k]);
          }
        };
        for (; i + K <= hidden; i += K) {
          loadFloat<T, L>(xr + i, xv);
          loadFloat<T, L>(gr + i, gv);
          loadFloat<W, L>(weight + i, wv);
          accumulate();
        }
        if (i < hidden) {
          loadFloat<T, L>(xr + i, xv, hidden - i);
          loadFloat<T, L>(gr + i, gv, hidden - i);
          loadFloat<W, L>(weight + i, wv, hidden - i);
          accumulate();
        }
        const float rstd =
            1.0f /
            std::sqrt(horizontalSum(sum_sq) / static_cast<float>(hidden) + eps);
        const float coef = horizontalSum(sum_gwx) * rstd * rstd * rstd /
                           static_cast<float>(hidden);
        const Vec rstd_v(rstd), coef_v(coef);
        Vec gx[L];
        auto compute = [&](float* pw, int64_t count) {
          for (int k = 0; k < L; ++k) {
            gx[k] = rstd_v * gv[k] * wv[k] - coef_v * xv[k];
            // The partial row of grad_w: float32, in the chunk's workspace.
            const int64_t left = count - k * kVecSize;
            if (left <= 0) continue;
            const int64_t n = std::min(left, kVecSize);
            Vec acc = Vec::loadu(pw + k * kVecSize, n);
            acc = at::vec::fmadd(gv[k] * xv[k], rstd_v, acc);
            acc.store(pw + k * kVecSize, static_cast<int>(n));
          }
        };
        for (i = 0; i + K <= hidden; i += K) {
          loadFloat<T, L>(xr + i, xv);
          loadFloat<T, L>(gr + i, gv);
          loadFloat<W, L>(weight + i, wv);
          compute(partial + i, K);
          storeFloat<T>(gxr + i, gx);
        }
        if (i < hidden) {
          loadFloat<T, L>(xr + i, xv, hidden - i);
          loadFloat<T, L>(gr + i, gv, hidden - i);
          loadFloat<W, L>(weight + i, wv, hidden - i);
          compute(partial + i, hidden - i);
          storeFloat<T>(gxr + i, gx, hidden - i);
        }
      }
    }
  });

  // grad_w[j] = sum over chunks, in chunk order, of partial[c][j].
  constexpr int LW = kLanes<W>;
  constexpr int64_t KW = kStep<W>;
  const int64_t column_grain =
      std::max<int64_t>(KW, kGrainElements / std::max<int64_t>(1, chunks));
  parallelFor(
      0, (hidden + KW - 1) / KW, std::max<int64_t>(1, column_grain / KW),
      [&](int64_t block_begin, int64_t block_end) {
        for (int64_t b = block_begin; b < block_end; ++b) {
          const int64_t j = b * KW;
          const int64_t count = std::min(KW, hidden - j);
          Vec sum[LW];
          for (int k = 0; k < LW; ++k) sum[k] = Vec(0.0f);
          for (int64_t c = 0; c < chunks; ++c) {
            Vec part[LW];
            loadFloat<float, LW>(workspace + c * hidden + j, part, count);
            for (int k = 0; k < LW; ++k) sum[k] = sum[k] + part[k];
          }
          storeFloat<W>(grad_weight + j, sum, count);
        }
      });
}

template <typename T, typename W>
struct RmsNormForward {
  static void run(const RmsNormForwardParams& p) {
    rmsNormForwardImpl<T, W>(p);
  }
};

template <typename T, typename W>
struct RmsNormBackward {
  static void run(const RmsNormBackwardParams& p) {
    rmsNormBackwardImpl<T, W>(p);
  }
};

inline void rmsNormForward(const RmsNormForwardParams& p) {
  dispatchXAndParam<RmsNormForward>(p, p.x_type, p.weight_type,
                                    "mydev::rms_norm");
}

inline void rmsNormBackward(const RmsNormBackwardParams& p) {
  dispatchXAndParam<RmsNormBackward>(p, p.x_type, p.weight_type,
                                     "mydev::rms_norm_backward");
}

}  // namespace mydev::custom_ops::CPU_CAPABILITY
