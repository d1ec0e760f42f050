// The loops of float_dot_products.h for each ISA, and the choice among them.
// Only <immintrin.h>, standard headers and vector_isa.h (declarations only)
// are included: the AVX functions get their ISA from a target attribute
// each, so no inline function of a shared header is ever compiled for an
// ISA the CPU may lack.
#include "float_dot_products.h"

#include "../core/vector_isa.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define MYDEV_X86_VECTOR_LOOPS
#endif

namespace mydev {
namespace {

// Rows per pass: each vector load of `vector` serves four rows, and four
// independent accumulators hide the latency of the multiply-adds.
constexpr int64_t kRowBlock = 4;

void rowDotProductsDefault(const float* matrix, int64_t row_stride,
                           int64_t rows, const float* vector, int64_t length,
                           float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = matrix + r * row_stride;
    float sum = 0;
    for (int64_t i = 0; i < length; ++i) sum += row[i] * vector[i];
    out[r] = sum;
  }
}

void addScaledDefault(float* accumulator, float scale, const float* vector,
                      int64_t length) {
  for (int64_t i = 0; i < length; ++i) accumulator[i] += scale * vector[i];
}

#ifdef MYDEV_X86_VECTOR_LOOPS

#define MYDEV_AVX2 __attribute__((target("avx2,fma")))
#define MYDEV_AVX512 __attribute__((target("avx512f,avx2,fma")))

MYDEV_AVX2 float horizontalSum(__m256 v) {
  const __m128 halves =
      _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 pairs = _mm_add_ps(halves, _mm_movehl_ps(halves, halves));
  return _mm_cvtss_f32(_mm_add_ss(pairs, _mm_shuffle_ps(pairs, pairs, 1)));
}

MYDEV_AVX2 void rowDotProductsAvx2(const float* matrix, int64_t row_stride,
                                   int64_t rows, const float* vector,
                                   int64_t length, float* out) {
  const int64_t full = length - length % 8;
  int64_t r = 0;
  for (; r + kRowBlock <= rows; r += kRowBlock) {
    const float* row0 = matrix + r * row_stride;
    const float* row1 = row0 + row_stride;
    const float* row2 = row1 + row_stride;
    const float* row3 = row2 + row_stride;
    __m256 sum0 = _mm256_setzero_ps(), sum1 = sum0, sum2 = sum0, sum3 = sum0;
    for (int64_t i = 0; i < full; i += 8) {
      const __m256 v = _mm256_loadu_ps(vector + i);
      sum0 = _mm256_fmadd_ps(_mm256_loadu_ps(row0 + i), v, sum0);
      sum1 = _mm256_fmadd_ps(_mm256_loadu_ps(row1 + i), v, sum1);
      sum2 = _mm256_fmadd_ps(_mm256_loadu_ps(row2 + i), v, sum2);
      sum3 = _mm256_fmadd_ps(_mm256_loadu_ps(row3 + i), v, sum3);
    }
    float tail0 = 0, tail1 = 0, tail2 = 0, tail3 = 0;
    for (int64_t i = full; i < length; ++i) {
      tail0 += row0[i] * vector[i];
      tail1 += row1[i] * vector[i];
      tail2 += row2[i] * vector[i];
      tail3 += row3[i] * vector[i];
    }
    out[r] = horizontalSum(sum0) + tail0;
    out[r + 1] = horizontalSum(sum1) + tail1;
    out[r + 2] = horizontalSum(sum2) + tail2;
    out[r + 3] = horizontalSum(sum3) + tail3;
  }
  for (; r < rows; ++r) {
    const float* row = matrix + r * row_stride;
    __m256 sum = _mm256_setzero_ps();
    for (int64_t i = 0; i < full; i += 8) {
      sum = _mm256_fmadd_ps(_mm256_loadu_ps(row + i),
                            _mm256_loadu_ps(vector + i), sum);
    }
    float tail = 0;
    for (int64_t i = full; i < length; ++i) tail += row[i] * vector[i];
    out[r] = horizontalSum(sum) + tail;
  }
}

MYDEV_AVX2 void addScaledAvx2(float* accumulator, float scale,
                              const float* vector, int64_t length) {
  const __m256 s = _mm256_set1_ps(scale);
  int64_t i = 0;
  for (; i + 8 <= length; i += 8) {
    _mm256_storeu_ps(accumulator + i,
                     _mm256_fmadd_ps(s, _mm256_loadu_ps(vector + i),
                                     _mm256_loadu_ps(accumulator + i)));
  }
  for (; i < length; ++i) accumulator[i] += scale * vector[i];
}

// The last length % 16 lanes are read with a mask: no scalar tail.
MYDEV_AVX512 __mmask16 tailMask(int64_t length) {
  return static_cast<__mmask16>((1u << (length % 16)) - 1u);
}

MYDEV_AVX512 void rowDotProductsAvx512(const float* matrix, int64_t row_stride,
                                       int64_t rows, const float* vector,
                                       int64_t length, float* out) {
  const int64_t full = length - length % 16;
  const __mmask16 tail = tailMask(length);
  const __m512 vector_tail = _mm512_maskz_loadu_ps(tail, vector + full);
  int64_t r = 0;
  for (; r + kRowBlock <= rows; r += kRowBlock) {
    const float* row0 = matrix + r * row_stride;
    const float* row1 = row0 + row_stride;
    const float* row2 = row1 + row_stride;
    const float* row3 = row2 + row_stride;
    __m512 sum0 = _mm512_setzero_ps(), sum1 = sum0, sum2 = sum0, sum3 = sum0;
    for (int64_t i = 0; i < full; i += 16) {
      const __m512 v = _mm512_loadu_ps(vector + i);
      sum0 = _mm512_fmadd_ps(_mm512_loadu_ps(row0 + i), v, sum0);
      sum1 = _mm512_fmadd_ps(_mm512_loadu_ps(row1 + i), v, sum1);
      sum2 = _mm512_fmadd_ps(_mm512_loadu_ps(row2 + i), v, sum2);
      sum3 = _mm512_fmadd_ps(_mm512_loadu_ps(row3 + i), v, sum3);
    }
    if (tail != 0) {
      sum0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, row0 + full),
                             vector_tail, sum0);
      sum1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, row1 + full),
                             vector_tail, sum1);
      sum2 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, row2 + full),
                             vector_tail, sum2);
      sum3 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, row3 + full),
                             vector_tail, sum3);
    }
    out[r] = _mm512_reduce_add_ps(sum0);
    out[r + 1] = _mm512_reduce_add_ps(sum1);
    out[r + 2] = _mm512_reduce_add_ps(sum2);
    out[r + 3] = _mm512_reduce_add_ps(sum3);
  }
  for (; r < rows; ++r) {
    const float* row = matrix + r * row_stride;
    __m512 sum = _mm512_setzero_ps();
    for (int64_t i = 0; i < full; i += 16) {
      sum = _mm512_fmadd_ps(_mm512_loadu_ps(row + i),
                            _mm512_loadu_ps(vector + i), sum);
    }
    if (tail != 0) {
      sum = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, row + full),
                            vector_tail, sum);
    }
    out[r] = _mm512_reduce_add_ps(sum);
  }
}

MYDEV_AVX512 void addScaledAvx512(float* accumulator, float scale,
                                  const float* vector, int64_t length) {
  const __m512 s = _mm512_set1_ps(scale);
  const int64_t full = length - length % 16;
  for (int64_t i = 0; i < full; i += 16) {
    _mm512_storeu_ps(accumulator + i,
                     _mm512_fmadd_ps(s, _mm512_loadu_ps(vector + i),
                                     _mm512_loadu_ps(accumulator + i)));
  }
  const __mmask16 tail = tailMask(length);
  if (tail != 0) {
    _mm512_mask_storeu_ps(
        accumulator + full, tail,
        _mm512_fmadd_ps(s, _mm512_maskz_loadu_ps(tail, vector + full),
                        _mm512_maskz_loadu_ps(tail, accumulator + full)));
  }
}

#endif  // MYDEV_X86_VECTOR_LOOPS

struct Loops {
  std::string isa;
  void (*row_dot_products)(const float*, int64_t, int64_t, const float*,
                           int64_t, float*);
  void (*add_scaled)(float*, float, const float*, int64_t);
};

const Loops& loops() {
  static const Loops chosen = []() -> Loops {
#ifdef MYDEV_X86_VECTOR_LOOPS
    switch (vectorIsa()) {
      case VectorIsa::Avx512:
        return {vectorIsaName(VectorIsa::Avx512), &rowDotProductsAvx512,
                &addScaledAvx512};
      case VectorIsa::Avx2:
        return {vectorIsaName(VectorIsa::Avx2), &rowDotProductsAvx2,
                &addScaledAvx2};
      case VectorIsa::Default: break;
    }
#endif
    return {vectorIsaName(VectorIsa::Default), &rowDotProductsDefault,
            &addScaledDefault};
  }();
  return chosen;
}

}  // namespace

void rowDotProducts(const float* matrix, int64_t row_stride, int64_t rows,
                    const float* vector, int64_t length, float* out) {
  loops().row_dot_products(matrix, row_stride, rows, vector, length, out);
}

void addScaled(float* accumulator, float scale, const float* vector,
               int64_t length) {
  loops().add_scaled(accumulator, scale, vector, length);
}

std::string floatDotProductIsa() { return loops().isa; }

}  // namespace mydev
