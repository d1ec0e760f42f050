// Shared helpers of the fused kernel bodies: vectorized loads and stores that
// compute in float32 whatever the storage dtype, horizontal sums, and the
// threading (parallelFor over rows or elements, see parallel.h).
//
// Included only by the per-ISA translation units (kernels_<isa>.cpp), after
// they selected the ISA: everything here lives in the ISA's namespace
// (CPU_CAPABILITY is DEFAULT, AVX2 or AVX512), as ATen's vector code does, so
// that the three compilations never clash.
#pragma once

#ifndef CPU_CAPABILITY
#error "fused_kernels.h is included by the kernels_<isa>.cpp files only"
#endif

#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernel_table.h"
#include "parallel.h"

namespace mydev::custom_ops::CPU_CAPABILITY {

using Vec = at::vec::Vectorized<float>;
constexpr int64_t kVecSize = Vec::size();

// Elements one loop step handles for storage dtype T: a full Vectorized<T>,
// i.e. 1 float vector for float and 2 for bfloat16/half (which convert into
// two float vectors).
template <typename T>
constexpr int64_t kStep = at::vec::Vectorized<T>::size();

template <typename T>
constexpr int kLanes = static_cast<int>(kStep<T> / kVecSize);

// The grain of the element-wise splits: ~32K elements per task, as ATen's
// own kernels use (below that, threading costs more than it gains).
constexpr int64_t kGrainElements = 32768;

// Loads N float vectors (N * kVecSize elements) stored as S, converting to
// float32. `count` < N * kVecSize loads a partial step, the rest zero.
template <typename S, int N>
inline void loadFloat(const S* p, Vec (&out)[N]) {
  if constexpr (std::is_same_v<S, float>) {
    for (int k = 0; k < N; ++k) {
      out[k] = Vec::loadu(p + k * kVecSize);
    }
  } else if constexpr (N % 2 == 0) {
    constexpr int64_t kPerLoad = at::vec::Vectorized<S>::size();
    for (int k = 0; k < N; k += 2) {
      auto [lo, hi] = at::vec::convert_to_float<S>(
          at::vec::Vectorized<S>::loadu(p + (k / 2) * kPerLoad));
      out[k] = lo;
      out[k + 1] = hi;
    }
  } else {
    static_assert(N == 1, "loadFloat: odd lane counts of reduced types");
    at::vec::load_to_float<S>(p, out[0]);
  }
}

template <typename S, int N>
inline void loadFloat(const S* p, Vec (&out)[N], int64_t count) {
  if constexpr (std::is_same_v<S, float>) {
    for (int k = 0; k < N; ++k) {
      const int64_t left = count - k * kVecSize;
      out[k] = left <= 0
                   ? Vec(0.0f)
                   : Vec::loadu(p + k * kVecSize, std::min(left, kVecSize));
    }
  } else if constexpr (N % 2 == 0) {
    constexpr int64_t kPerLoad = at::vec::Vectorized<S>::size();
    for (int k = 0; k < N; k += 2) {
      const int64_t left = count - (k / 2) * kPerLoad;
      if (left <= 0) {
        out[k] = out[k + 1] = Vec(0.0f);
        continue;
      }
      auto [lo, hi] =
          at::vec::convert_to_float<S>(at::vec::Vectorized<S>::loadu(
              p + (k / 2) * kPerLoad, std::min(left, kPerLoad)));
      out[k] = lo;
      out[k + 1] = hi;
    }
  } else {
    static_assert(N == 1, "loadFloat: odd lane counts of reduced types");
    __at_align__ float buffer[kVecSize] = {};
    for (int64_t i = 0; i < count; ++i) {
      buffer[i] = static_cast<float>(p[i]);
    }
    out[0] = Vec::loadu(buffer);
  }
}

// Stores kStep<T> elements (kLanes<T> float vectors) as T; `count` stores
// the first `count` only.
template <typename T>
inline void storeFloat(T* p, const Vec (&in)[kLanes<T>]) {
  if constexpr (std::is_same_v<T, float>) {
    in[0].store(p);
  } else {
    at::vec::convert_from_float<T>(in[0], in[1]).store(p);
  }
}

template <typename T>
inline void storeFloat(T* p, const Vec (&in)[kLanes<T>], int64_t count) {
  if constexpr (std::is_same_v<T, float>) {
    in[0].store(p, static_cast<int>(count));
  } else {
    at::vec::convert_from_float<T>(in[0], in[1])
        .store(p, static_cast<int>(count));
  }
}

// Sum of a vector's lanes, always in the same order.
inline float horizontalSum(const Vec& v) {
  __at_align__ float lanes[kVecSize];
  v.store(lanes);
  float sum = 0.0f;
  for (int64_t i = 0; i < kVecSize; ++i) {
    sum += lanes[i];
  }
  return sum;
}

template <int N>
inline float horizontalSum(const Vec (&v)[N]) {
  Vec total = v[0];
  for (int k = 1; k < N; ++k) {
    total = total + v[k];
  }
  return horizontalSum(total);
}

// f(begin, end) over [begin, end) on ATen's intra-op threads (parallel.h):
// at::parallel_for's contract, for any callable.
template <typename F>
void rangeTrampoline(const void* context, int64_t begin, int64_t end) {
  (*static_cast<const F*>(context))(begin, end);
}

template <typename F>
inline void parallelFor(int64_t begin, int64_t end, int64_t grain, const F& f) {
  mydev::custom_ops::parallelFor(begin, end, grain, &rangeTrampoline<F>, &f);
}

// f(begin, end) over row ranges, about kGrainElements elements per task.
template <typename F>
inline void parallelOverRows(int64_t rows, int64_t elements_per_row,
                             const F& f) {
  const int64_t grain = std::max<int64_t>(
      1, kGrainElements / std::max<int64_t>(1, elements_per_row));
  parallelFor(0, rows, grain, f);
}

// f(begin, end) over a flat range of elements.
template <typename F>
inline void parallelOverElements(int64_t n, const F& f) {
  parallelFor(0, n, kGrainElements, f);
}

// Runs Impl<T, P>::run(p) for the storage dtypes of an activation (T: float,
// bfloat16 or half) and of a parameter (P: T or float), the pairs the
// kernels' contract allows.
template <template <typename, typename> class Impl, typename Params>
void dispatchXAndParam(const Params& p, c10::ScalarType x_type,
                       c10::ScalarType param_type, const char* name) {
  using BF16 = c10::BFloat16;
  using F16 = c10::Half;
  const bool param_float = param_type == c10::ScalarType::Float;
  if (!param_float && param_type != x_type) {
    throwUnsupportedDtypes(name, x_type, param_type);
  }
  switch (x_type) {
    case c10::ScalarType::Float: return Impl<float, float>::run(p);
    case c10::ScalarType::BFloat16:
      return param_float ? Impl<BF16, float>::run(p) : Impl<BF16, BF16>::run(p);
    case c10::ScalarType::Half:
      return param_float ? Impl<F16, float>::run(p) : Impl<F16, F16>::run(p);
    default: throwUnsupportedDtypes(name, x_type, param_type);
  }
}

}  // namespace mydev::custom_ops::CPU_CAPABILITY
