// The device random-number library of the code torch.compile builds for
// mydev: the counter-based generator behind compiled dropout, rand and randn,
// one vector of lanes at a time.
//
// Inductor's C++ kernels draw each lane on its own: normalized_rand_cpu(seed,
// offset) builds a Philox4x32-10 engine for the counter `offset`, runs its ten
// rounds, keeps the first of the four words and throws the engine away, one
// scalar lane after another; a compiled GPT-2 training step from Hugging Face
// transformers ran slower than eager mydev, mostly there and in the bool
// masks (mydev_bool_masks.h). Here the rounds run over all lanes of a vector
// together, in the vector ISA the kernel is built for, and only the words a
// draw uses are kept: a compiled softmax and dropout over [8, 4, 128, 128]
// went from 7.0 to 2.3 ms on a 2-core AVX-512 host.
//
// The numbers are torch's, bit for bit: the same counter, key and rounds as
// at::Philox4_32 (ATen/core/PhiloxRNGEngine.h), the same conversions as
// cpp_prefix.h's normalized_rand_cpu and randn_cpu, which the scalar parts of
// the same kernels (loop tails) still call. That holds under the kernels'
// floating-point flags (Inductor's default -ffp-contract=off): allowed to
// fuse randn's 1 - u into a multiply-add, a compiler may do so in one loop and
// not the other. randint64, far rarer in compiled code than dropout, keeps
// Inductor's per-lane code.
// tests/test_compile_random.py compares the two paths lane for lane.
#pragma once

#include <torch/csrc/inductor/cpp_prefix.h>

#include <cmath>
#include <cstdint>

#if defined(CPU_CAPABILITY_AVX512) || defined(CPU_CAPABILITY_AVX2)
#include <immintrin.h>
#endif

namespace mydev_random {
namespace detail {

constexpr uint32_t kRoundMultiplierA = 0xD2511F53;
constexpr uint32_t kRoundMultiplierB = 0xCD9E8D57;
constexpr uint32_t kKeyIncrementA = 0x9E3779B9;
constexpr uint32_t kKeyIncrementB = 0xBB67AE85;
constexpr int kRounds = 10;

// A Philox4x32 round multiplies two 32-bit words of each lane into 64 bits
// and keeps both halves. x86 multiplies 32 bits into 64 per 64-bit slot of a
// vector (vpmuludq), reading only the slot's low half, so each lane's words
// live in a 64-bit slot: the product needs no shuffling, its high half is one
// shift away, and the garbage the low-half words carry above bit 31 never
// reaches a multiply's input bits or the words kept at the end. A kernel's
// vector of lanes is several such vectors, and their rounds are interleaved:
// one lane group alone would wait on the multiply's latency every round.
#if defined(CPU_CAPABILITY_AVX512)
using Slots = __m512i;
constexpr int kSlotsPerVector = 8;
inline Slots load(const uint64_t* words) { return _mm512_loadu_si512(words); }
inline void store(uint64_t* words, Slots v) { _mm512_storeu_si512(words, v); }
inline Slots broadcast(uint32_t word) { return _mm512_set1_epi64(word); }
inline Slots bitXor(Slots a, Slots b) { return _mm512_xor_si512(a, b); }
inline Slots multiply(Slots a, Slots b) { return _mm512_mul_epu32(a, b); }
inline Slots highHalf(Slots a) { return _mm512_srli_epi64(a, 32); }
#elif defined(CPU_CAPABILITY_AVX2)
using Slots = __m256i;
constexpr int kSlotsPerVector = 4;
inline Slots load(const uint64_t* words) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(words));
}
inline void store(uint64_t* words, Slots v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(words), v);
}
inline Slots broadcast(uint32_t word) {
  return _mm256_set1_epi64x(static_cast<int64_t>(word));
}
inline Slots bitXor(Slots a, Slots b) { return _mm256_xor_si256(a, b); }
inline Slots multiply(Slots a, Slots b) { return _mm256_mul_epu32(a, b); }
inline Slots highHalf(Slots a) { return _mm256_srli_epi64(a, 32); }
#else
// No vector ISA: one slot per "vector", the same recurrence in scalars.
using Slots = uint64_t;
constexpr int kSlotsPerVector = 1;
inline Slots load(const uint64_t* words) { return *words; }
inline void store(uint64_t* words, Slots v) { *words = v; }
inline Slots broadcast(uint32_t word) { return word; }
inline Slots bitXor(Slots a, Slots b) { return a ^ b; }
inline Slots multiply(Slots a, Slots b) {
  return static_cast<uint64_t>(static_cast<uint32_t>(a)) *
         static_cast<uint32_t>(b);
}
inline Slots highHalf(Slots a) { return a >> 32; }
#endif

// The first two output words of Philox4x32-10 for each lane's counter
// (offset, 0, 0, 0) under the key (seed, 0): the state torch's generated
// kernels start from, both seed and offset taken as 32-bit as those kernels
// take them.
template <typename Offset, int Lanes>
inline void philoxFirstWords(uint32_t seed, const Offset (&offset)[Lanes],
                             uint32_t (&word0)[Lanes],
                             uint32_t (&word1)[Lanes]) {
  static_assert(Lanes % kSlotsPerVector == 0,
                "a kernel's vector is a whole number of machine vectors");
  constexpr int kGroups = Lanes / kSlotsPerVector;
  uint64_t slots[Lanes];
  for (int lane = 0; lane < Lanes; ++lane) {
    slots[lane] = static_cast<uint32_t>(offset[lane]);
  }
  const Slots multiplierA = broadcast(kRoundMultiplierA);
  const Slots multiplierB = broadcast(kRoundMultiplierB);
  Slots c0[kGroups], c1[kGroups], c2[kGroups], c3[kGroups];
  for (int group = 0; group < kGroups; ++group) {
    c0[group] = load(slots + group * kSlotsPerVector);
    c1[group] = c2[group] = c3[group] = broadcast(0);
  }
  uint32_t key0 = seed;
  uint32_t key1 = 0;
  for (int round = 0; round < kRounds; ++round) {
    const Slots roundKey0 = broadcast(key0);
    const Slots roundKey1 = broadcast(key1);
    for (int group = 0; group < kGroups; ++group) {
      const Slots product0 = multiply(c0[group], multiplierA);
      const Slots product1 = multiply(c2[group], multiplierB);
      c0[group] = bitXor(bitXor(highHalf(product1), c1[group]), roundKey0);
      c2[group] = bitXor(bitXor(highHalf(product0), c3[group]), roundKey1);
      c1[group] = product1;
      c3[group] = product0;
    }
    key0 += kKeyIncrementA;
    key1 += kKeyIncrementB;
  }
  // A word is the low half of its lane's slot.
  const auto lowHalves = [&slots](const Slots(&words)[kGroups],
                                  uint32_t(&out)[Lanes]) {
    for (int group = 0; group < kGroups; ++group) {
      store(slots + group * kSlotsPerVector, words[group]);
    }
    for (int lane = 0; lane < Lanes; ++lane) {
      out[lane] = static_cast<uint32_t>(slots[lane]);
    }
  };
  lowHalves(c0, word0);
  lowHalves(c1, word1);
}

}  // namespace detail

// normalized_rand_cpu(seed, offset[lane]) for every lane.
template <typename Offset, int Lanes>
inline void uniform(uint32_t seed, const Offset (&offset)[Lanes],
                    float (&result)[Lanes]) {
  uint32_t word0[Lanes], word1[Lanes];
  detail::philoxFirstWords(seed, offset, word0, word1);
  for (int lane = 0; lane < Lanes; ++lane) {
    result[lane] = uint32_to_uniform_float(word0[lane]);
  }
}

// randn_cpu(seed, offset[lane]) for every lane: Box-Muller on the first two
// words, in the same float and double steps as the engine's randn.
template <typename Offset, int Lanes>
inline void normal(uint32_t seed, const Offset (&offset)[Lanes],
                   float (&result)[Lanes]) {
  uint32_t word0[Lanes], word1[Lanes];
  detail::philoxFirstWords(seed, offset, word0, word1);
  for (int lane = 0; lane < Lanes; ++lane) {
    const float u1 = 1 - uint32_to_uniform_float(word0[lane]);
    const float u2 = 1 - uint32_to_uniform_float(word1[lane]);
    result[lane] = static_cast<float>(std::sqrt(-2.0 * std::log(u1)) *
                                      std::cos(2.0 * M_PI * u2));
  }
}

}  // namespace mydev_random
