// swiglu kernel bodies (forward and backward), compiled once per ISA by
// kernels_<isa>.cpp. See kernel_table.h for the contract.
#pragma once

#include <mydev_math.h>

#include "fused_kernels.h"
#include "kernel_table.h"

namespace mydev::custom_ops::CPU_CAPABILITY {

// sigmoid(g) = 1 / (1 + exp(-g)); exp(-g) overflowing to inf gives 0, the
// limit. Measured on two cores at [1024, 11008], the kernels are bound by
// arithmetic as much as by memory, so the exp is chosen per dtype:
//  * float32: the device math library's (device_ext/include/mydev_math.h),
//    inlined and within 1 ulp like Sleef's out-of-line one, which left the
//    forward at 1.44-1.51x the composed ops on an AVX2 host (2.0x now);
//  * bfloat16/float16, whose rounding hides any float32 error: ATen's
//    exp_u20 (<= 20 ulp), cheaper still (fused forward + backward 1.42-1.55x
//    the composed ops with it, 1.33-1.36x with the math library's; with
//    Sleef's, the bfloat16 forward took 3.9 ms instead of 3.0 at
//    [2048, 11008] on an AVX-512 host).
template <typename T>
inline Vec sigmoid(const Vec& g) {
  const Vec one(1.0f);
  if constexpr (std::is_same_v<T, float>) {
    return one / (one + mydev_math::exp(g.neg()));
  } else {
    return one / (one + g.neg().exp_u20());
  }
}

// One pass: reads gate and up, writes out.
template <typename T, typename /*unused*/>
struct SwigluForward {
  static void run(const SwigluForwardParams& p) {
    constexpr int L = kLanes<T>;
    constexpr int64_t K = kStep<T>;
    const T* gate = static_cast<const T*>(p.gate);
    const T* up = static_cast<const T*>(p.up);
    T* out = static_cast<T*>(p.out);
    parallelOverElements(p.n, [&](int64_t begin, int64_t end) {
      Vec g[L], u[L];
      auto compute = [&] {
        for (int k = 0; k < L; ++k) g[k] = g[k] * sigmoid<T>(g[k]) * u[k];
      };
      int64_t i = begin;
      for (; i + K <= end; i += K) {
        loadFloat<T, L>(gate + i, g);
        loadFloat<T, L>(up + i, u);
        compute();
        storeFloat<T>(out + i, g);
      }
      if (i < end) {
        loadFloat<T, L>(gate + i, g, end - i);
        loadFloat<T, L>(up + i, u, end - i);
        compute();
        storeFloat<T>(out + i, g, end - i);
      }
    });
  }
};

// One pass: reads grad, gate and up, writes grad_gate and grad_up.
//   s = sigmoid(gate), silu = gate * s
//   grad_up = grad * silu
//   grad_gate = grad * up * s * (1 + gate * (1 - s))
template <typename T, typename /*unused*/>
struct SwigluBackward {
  static void run(const SwigluBackwardParams& p) {
    constexpr int L = kLanes<T>;
    constexpr int64_t K = kStep<T>;
    const T* grad_out = static_cast<const T*>(p.grad_out);
    const T* gate = static_cast<const T*>(p.gate);
    const T* up = static_cast<const T*>(p.up);
    T* grad_gate = static_cast<T*>(p.grad_gate);
    T* grad_up = static_cast<T*>(p.grad_up);
    parallelOverElements(p.n, [&](int64_t begin, int64_t end) {
      const Vec one(1.0f);
      Vec dy[L], g[L], u[L], dg[L], du[L];
      auto compute = [&] {
        for (int k = 0; k < L; ++k) {
          const Vec s = sigmoid<T>(g[k]);
          du[k] = dy[k] * g[k] * s;
          dg[k] = dy[k] * u[k] * s * at::vec::fmadd(g[k], one - s, one);
        }
      };
      int64_t i = begin;
      for (; i + K <= end; i += K) {
        loadFloat<T, L>(grad_out + i, dy);
        loadFloat<T, L>(gate + i, g);
        loadFloat<T, L>(up + i, u);
        compute();
        storeFloat<T>(grad_gate + i, dg);
        storeFloat<T>(grad_up + i, du);
      }
      if (i < end) {
        const int64_t n = end - i;
        loadFloat<T, L>(grad_out + i, dy, n);
        loadFloat<T, L>(gate + i, g, n);
        loadFloat<T, L>(up + i, u, n);
        compute();
        storeFloat<T>(grad_gate + i, dg, n);
        storeFloat<T>(grad_up + i, du, n);
      }
    });
  }
};

// gate, up and the outputs share one dtype: dispatch on it alone.
inline void swigluForward(const SwigluForwardParams& p) {
  dispatchXAndParam<SwigluForward>(p, p.type, p.type, "mydev::swiglu");
}

inline void swigluBackward(const SwigluBackwardParams& p) {
  dispatchXAndParam<SwigluBackward>(p, p.type, p.type,
                                    "mydev::swiglu_backward");
}

}  // namespace mydev::custom_ops::CPU_CAPABILITY
