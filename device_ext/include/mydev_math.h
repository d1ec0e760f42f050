// The device math library of the code torch.compile builds for mydev: the
// transcendental functions its vectorized kernels call, where a vendor's
// compiler would link its own fast math (CUDA's libdevice, SYCL's device
// libraries).
//
// Why not ATen's Vectorized<float>::exp()/erf(): those call Sleef's exp, a
// function call per vector with its own special-case handling, and erf is
// Abramowitz-Stegun 7.1.26 on top of that exp and a division. Here exp is
// inlined (range reduction, one degree-6 polynomial, a power-of-two scale)
// and erf is one rational function, odd in x, with no exp at all. A GELU is
// then about as fast as oneDNN's in eager mode instead of 1.7x slower.
//
// Accuracy, against the correctly rounded result over every float32 (and a
// sweep in tests/test_compile_math.py): exp within 1 ulp, as Sleef's; erf
// within 7 ulp (3.9e-7 absolute), where ATen's vectorized erf is off by up to
// 5.4e-7 and has no relative accuracy near 0; expm1 within 4 ulp, where
// Inductor's exp(x) - 1 has none near 0. NaN stays NaN; infinities,
// overflow and denormal results are what std::exp and std::erf give.
//
// Kernels of other dtypes and vector widths (VectorizedN, Vectorized<double>)
// keep ATen's functions through the generic overloads.
#pragma once

#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>

namespace mydev_math {

template <typename Vector>
inline Vector exp(const Vector& x) {
  return x.exp();
}

template <typename Vector>
inline Vector erf(const Vector& x) {
  return x.erf();
}

// What Inductor's vector code computes for expm1 on every device, for the
// types without a specialization below.
template <typename Vector>
inline Vector expm1(const Vector& x) {
  return x.exp() - Vector(1);
}

#if defined(CPU_CAPABILITY_AVX512) || defined(CPU_CAPABILITY_AVX2)

using FloatVector = at::vec::Vectorized<float>;

namespace detail {

#if defined(CPU_CAPABILITY_AVX512)
// 2^n * p for integral n in [-151, 130]: scalef rounds, overflows to
// infinity and goes through the denormals as the exact result would.
inline FloatVector scaleByPowerOfTwo(const FloatVector& p,
                                     const FloatVector& n) {
  return _mm512_scalef_ps(p, n);
}
#else
// AVX2 has no scalef: build 2^n from its exponent bits, in two halves so
// that each stays a normal float for n in [-252, 254].
inline FloatVector scaleByPowerOfTwo(const FloatVector& p,
                                     const FloatVector& n) {
  const __m256i whole = _mm256_cvtps_epi32(n);
  const __m256i half = _mm256_srai_epi32(whole, 1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 first =
      _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, bias), 23));
  const __m256 second = _mm256_castsi256_ps(_mm256_slli_epi32(
      _mm256_add_epi32(_mm256_sub_epi32(whole, half), bias), 23));
  return _mm256_mul_ps(_mm256_mul_ps(p, first), second);
}
#endif

// P(r) of exp(r) = 1 + r + r^2 P(r) on |r| <= ln(2) / 2, fitted for least
// relative error of exp on that interval (max 3.1e-9).
inline FloatVector expPolynomial(const FloatVector& r) {
  FloatVector p(0.001381461295463258f);
  p = at::vec::fmadd(p, r, FloatVector(0.008368709846842314f));
  p = at::vec::fmadd(p, r, FloatVector(0.04166838736766771f));
  p = at::vec::fmadd(p, r, FloatVector(0.16666520689588907f));
  return at::vec::fmadd(p, r, FloatVector(0.4999999345167624f));
}

}  // namespace detail

// exp(x) = 2^n exp(r) with n = round(x / ln 2) and |r| <= ln(2) / 2; r is
// taken in two steps (ln 2 as a short high part and a low part) so that x -
// n ln 2 is exact for every n this range has.
//
// Below -104 exp is 0 in float32. Those lanes (a masked softmax's -inf
// scores: half of a causal attention's) are computed on 0 and zeroed at the
// end, because scaling them down to zero passes through the denormals, and
// an x86 vector instruction with a denormal result takes a microcode assist:
// a causal softmax compiled for mydev ran 3.7x slower than an unmasked one.
template <>
inline FloatVector exp(const FloatVector& x) {
  const FloatVector lowest(-104.0f);
  const FloatVector underflows = x < lowest;
  // Beyond 89 exp is infinity in float32; clamp keeps NaN.
  const FloatVector bounded =
      FloatVector::blendv(at::vec::clamp(x, lowest, FloatVector(89.0f)),
                          FloatVector(0.0f), underflows);
  const FloatVector n = (bounded * FloatVector(1.44269504088896341f)).round();
  FloatVector r = at::vec::fmadd(n, FloatVector(-0.693359375f), bounded);
  r = at::vec::fmadd(n, FloatVector(2.12194440e-4f), r);
  const FloatVector p =
      at::vec::fmadd(detail::expPolynomial(r), r * r, r + FloatVector(1.0f));
  return FloatVector::blendv(detail::scaleByPowerOfTwo(p, n), FloatVector(0.0f),
                             underflows);
}

// expm1(x): near 0, exp(x) - 1 keeps only the bits of the result that
// exp(x)'s rounding left (Inductor's expm1 is off by 4% at 1e-6 and gives 0
// at 1e-40). Within |x| < ln(2) / 2, exp's polynomial without its leading 1
// is expm1 itself, x + x^2 P(x); beyond, exp(x) - 1 loses at most two bits.
template <>
inline FloatVector expm1(const FloatVector& x) {
  const FloatVector near_zero =
      at::vec::fmadd(detail::expPolynomial(x), x * x, x);
  const FloatVector elsewhere = exp(x) - FloatVector(1.0f);
  return FloatVector::blendv(elsewhere, near_zero,
                             x.abs() < FloatVector(0.34657359f));
}

// erf(x) = x P(x^2) / Q(x^2) on [-4, 4], a rational function fitted for
// least relative error (max 6.5e-8 in exact arithmetic); |erf(x)| rounds to
// 1 in float32 beyond 4, so x is clamped there (which keeps NaN).
template <>
inline FloatVector erf(const FloatVector& x) {
  const FloatVector bounded =
      at::vec::clamp(x, FloatVector(-4.0f), FloatVector(4.0f));
  const FloatVector t = bounded * bounded;
  FloatVector p(1.9110503696196455e-08f);
  p = at::vec::fmadd(p, t, FloatVector(-1.9422999522532e-06f));
  p = at::vec::fmadd(p, t, FloatVector(0.00014728806769592897f));
  p = at::vec::fmadd(p, t, FloatVector(0.003990674886478178f));
  p = at::vec::fmadd(p, t, FloatVector(0.05152523227827918f));
  p = at::vec::fmadd(p, t, FloatVector(0.20712791719192564f));
  p = at::vec::fmadd(p, t, FloatVector(1.1283790940894594f));
  FloatVector q(0.0010211345675130968f);
  q = at::vec::fmadd(q, t, FloatVector(0.01495829017875684f));
  q = at::vec::fmadd(q, t, FloatVector(0.11797184378975317f));
  q = at::vec::fmadd(q, t, FloatVector(0.5168935857845445f));
  q = at::vec::fmadd(q, t, FloatVector(1.0f));
  // The fit overshoots 1 by an ulp near the clamp.
  return at::vec::clamp(bounded * p / q, FloatVector(-1.0f), FloatVector(1.0f));
}

#endif  // CPU_CAPABILITY_AVX512 || CPU_CAPABILITY_AVX2

}  // namespace mydev_math
