// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC'11): a counter-based generator. Any number of the stream is computed
// directly from (key, position), so a kernel can draw element i's number
// wherever and on whichever thread it computes element i.
#pragma once

#include <array>
#include <cstdint>

namespace mydev {

// One Philox4x32-10 block: the four 32-bit numbers at 128-bit counter
// {counter_lo, counter_hi, 0, 0} under 64-bit key {key_lo, key_hi}.
inline std::array<uint32_t, 4> philox4x32_10(uint64_t key, uint64_t counter) {
  constexpr uint32_t kMultiplier0 = 0xD2511F53u;
  constexpr uint32_t kMultiplier1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u;  // golden ratio
  constexpr uint32_t kWeyl1 = 0xBB67AE85u;  // sqrt(3) - 1
  std::array<uint32_t, 4> block{static_cast<uint32_t>(counter),
                                static_cast<uint32_t>(counter >> 32), 0u, 0u};
  uint32_t key0 = static_cast<uint32_t>(key);
  uint32_t key1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t product0 = static_cast<uint64_t>(kMultiplier0) * block[0];
    const uint64_t product1 = static_cast<uint64_t>(kMultiplier1) * block[2];
    block = {static_cast<uint32_t>(product1 >> 32) ^ block[1] ^ key0,
             static_cast<uint32_t>(product1),
             static_cast<uint32_t>(product0 >> 32) ^ block[3] ^ key1,
             static_cast<uint32_t>(product0)};
    key0 += kWeyl0;
    key1 += kWeyl1;
  }
  return block;
}

// The 32-bit number at `position` of the stream of `seed`: lane
// position % 4 of the block at counter position / 4. Remembers the last
// block, so walking positions in order costs one block per four numbers.
// One per thread.
class PhiloxStream {
 public:
  explicit PhiloxStream(uint64_t seed) : seed_(seed) {}

  uint32_t at(uint64_t position) {
    const uint64_t counter = position / 4;
    if (!cached_ || counter != counter_) {
      block_ = philox4x32_10(seed_, counter);
      counter_ = counter;
      cached_ = true;
    }
    return block_[position % 4];
  }

 private:
  uint64_t seed_;
  uint64_t counter_ = 0;
  bool cached_ = false;
  std::array<uint32_t, 4> block_{};
};

// A 32-bit number as a uniform float in [0, 1) (24 bits) or double in
// [0, 1) (all 32 bits): exact, and never 1 after rounding.
template <typename T>
inline T uniformFromBits(uint32_t bits);

template <>
inline float uniformFromBits<float>(uint32_t bits) {
  return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f);
}

template <>
inline double uniformFromBits<double>(uint32_t bits) {
  return static_cast<double>(bits) * (1.0 / 4294967296.0);
}

// The same in (0, 1], for logarithms.
template <typename T>
inline T positiveUniformFromBits(uint32_t bits);

template <>
inline float positiveUniformFromBits<float>(uint32_t bits) {
  return static_cast<float>((bits >> 8) + 1) * (1.0f / 16777216.0f);
}

template <>
inline double positiveUniformFromBits<double>(uint32_t bits) {
  return (static_cast<double>(bits) + 1.0) * (1.0 / 4294967296.0);
}

}  // namespace mydev
