// Boolean tensors in the vectorized kernels torch.compile builds for mydev:
// a vector's worth of bools loaded into a lane mask, and a lane mask stored
// back as bools (dropout's keep-masks, attention masks, where's conditions).
//
// ATen's VecMask::from(const bool*, count) and VecMask::store(bool*, count)
// go through a scalar loop per lane and a round trip through memory; in a
// compiled GPT-2 training step they were a third of the softmax-and-dropout
// kernels' time. For a float mask of one vector (the mask type Inductor uses
// for float32 kernels: 16 lanes on AVX-512, 8 on AVX2) the bytes move in one
// load or store and the lanes in one compare (AVX-512: masked byte moves;
// AVX2: one 8-byte word, widened or narrowed). Other mask types, and builds
// without AVX2, keep ATen's functions.
//
// Same results as ATen's: a lane is true when its byte is nonzero and is
// stored as 1 when any of its mask bits is set; lanes at and beyond `count`
// are neither read nor written.
#pragma once

#include <ATen/cpu/vec/vec.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace mydev_masks {

template <typename Mask>
inline Mask load(const bool* bytes, int64_t count) {
  return Mask::from(bytes, static_cast<int>(count));
}

template <typename Mask>
inline void store(const Mask& mask, bool* bytes, int64_t count) {
  Mask(mask).store(bytes, static_cast<int>(count));
}

#if defined(CPU_CAPABILITY_AVX512)

using FloatMask = at::vec::VecMask<float, 1>;
static_assert(FloatMask::size() == 16, "one AVX-512 vector of floats");

namespace detail {
inline __mmask16 firstLanes(int64_t count) {
  return count >= 16 ? static_cast<__mmask16>(0xFFFF)
                     : static_cast<__mmask16>((1u << count) - 1u);
}
}  // namespace detail

template <>
inline FloatMask load<FloatMask>(const bool* bytes, int64_t count) {
  const __m128i loaded = _mm_maskz_loadu_epi8(detail::firstLanes(count), bytes);
  const __mmask16 lanes = _mm_test_epi8_mask(loaded, loaded);
  return FloatMask(at::vec::Vectorized<float>(
      _mm512_castsi512_ps(_mm512_movm_epi32(lanes))));
}

template <>
inline void store<FloatMask>(const FloatMask& mask, bool* bytes,
                             int64_t count) {
  const __m512i bits = _mm512_castps_si512(at::vec::Vectorized<float>(mask));
  const __mmask16 lanes = _mm512_test_epi32_mask(bits, bits);
  _mm_mask_storeu_epi8(bytes, detail::firstLanes(count),
                       _mm_maskz_set1_epi8(lanes, 1));
}

#elif defined(CPU_CAPABILITY_AVX2)

using FloatMask = at::vec::VecMask<float, 1>;
static_assert(FloatMask::size() == 8, "one AVX2 vector of floats");

template <>
inline FloatMask load<FloatMask>(const bool* bytes, int64_t count) {
  // A short tail is copied into a zeroed word, so no byte past `count` is
  // read.
  int64_t word = 0;
  std::memcpy(&word, bytes, static_cast<size_t>(std::min<int64_t>(count, 8)));
  const __m256i lanes = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(word));
  const __m256i is_false = _mm256_cmpeq_epi32(lanes, _mm256_setzero_si256());
  const __m256i is_true = _mm256_xor_si256(is_false, _mm256_set1_epi32(-1));
  return FloatMask(at::vec::Vectorized<float>(_mm256_castsi256_ps(is_true)));
}

template <>
inline void store<FloatMask>(const FloatMask& mask, bool* bytes,
                             int64_t count) {
  const __m256i bits = _mm256_castps_si256(at::vec::Vectorized<float>(mask));
  const __m256i is_false = _mm256_cmpeq_epi32(bits, _mm256_setzero_si256());
  const __m256i ones = _mm256_andnot_si256(is_false, _mm256_set1_epi32(1));
  // 8 x int32 -> 8 x int16 -> 8 bytes, in lane order (packs work within
  // 128-bit halves, so the halves are split first).
  const __m128i halves = _mm_packs_epi32(_mm256_castsi256_si128(ones),
                                         _mm256_extracti128_si256(ones, 1));
  const int64_t word = _mm_cvtsi128_si64(_mm_packus_epi16(halves, halves));
  std::memcpy(bytes, &word, static_cast<size_t>(std::min<int64_t>(count, 8)));
}

#endif  // CPU_CAPABILITY_AVX512, CPU_CAPABILITY_AVX2

}  // namespace mydev_masks
