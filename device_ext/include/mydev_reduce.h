// The summation helpers of the code torch.compile builds for mydev: what
// Inductor's C++ kernels use for a float sum over more than one chunk
// (CascadeSumHelper in torch/csrc/inductor/cpp_prefix.h), with the same
// pairwise (cascade) order, so a kernel's result is bitwise what torch's
// helper gives.
//
// Why not torch's helper: it adds each value to sum_stk[0], an element of a
// std::vector. The compiler cannot keep that element in a register (the
// vector's heap storage may alias the kernel's inputs), so every vector add
// of the reduction's loop is a load, an add and a store on one address: the
// loop runs at store-to-load forwarding latency. Measured on a 2-core AVX2
// host, a compiled full sum of 2M float32 took 670 us against 170 us for
// ATen's eager sum. Here the running chunk sum is a member of a helper that
// the kernel keeps on its stack and that never escapes, so after inlining it
// lives in a register; the levels of the cascade, touched once per chunk,
// stay in memory behind a call the loop does not inline. The same sum takes
// 260 us (most of the rest is torch.compile's own per-call overhead).
//
// The names and signatures are torch's, in their own namespace:
// inductor_backend/scheduling.py renames the calls in each kernel's source.
#pragma once

#include <cstdint>
#include <vector>

namespace mydev_reduce {

template <typename T, uint64_t kChunkSize = 0>
struct CascadeSumHelper {
  T chunk = T(0);  // the running sum of the current chunk
  uint64_t index = 0;
  uint64_t num_chunks = 0;
  uint64_t depth = 0;
  std::vector<T> levels;  // levels[j]: the sum of 2^j finished chunks

  CascadeSumHelper() = default;
  // A sum of one chunk or less has no levels: nothing is allocated for it
  // (finishChunk and cascade_sum_final only run over depth > 0).
  explicit CascadeSumHelper(uint64_t count) {
    const uint64_t chunks = (count + kChunkSize - 1) / kChunkSize;
    while ((uint64_t{1} << depth) < chunks) ++depth;
    levels.assign(depth, T(0));
  }
};

namespace detail {

// A chunk ended: carry it up the levels as torch's helper does (a binary
// counter over finished chunks). Returns the new running chunk sum, which
// keeps the old one when the count of chunks is odd (torch adds the next
// chunk on top of it, in its level 0).
template <typename T>
__attribute__((noinline)) T finishChunk(T chunk, T* levels, uint64_t depth,
                                        uint64_t num_chunks) {
  levels[0] = chunk;
  uint64_t mask = num_chunks;
  for (uint64_t j = 1; j < depth && (mask & 1) == 0; ++j) {
    levels[j] = levels[j] + levels[j - 1];
    levels[j - 1] = T(0);
    mask >>= 1;
  }
  chunk = levels[0];
  levels[0] = T(0);
  return chunk;
}

template <typename T, uint64_t kChunkSize>
inline void countValue(CascadeSumHelper<T, kChunkSize>* helper) {
  if (helper->depth > 0 && ++helper->index == kChunkSize) {
    helper->index = 0;
    helper->chunk = finishChunk(helper->chunk, helper->levels.data(),
                                helper->depth, ++helper->num_chunks);
  }
}

}  // namespace detail

// Like torch's, the value returned is the running chunk sum, not the total:
// only cascade_sum_final's is the result.
template <typename T, uint64_t kChunkSize>
inline T cascade_sum_combine(T& value,
                             CascadeSumHelper<T, kChunkSize>* helper) {
  helper->chunk = helper->chunk + value;
  detail::countValue(helper);
  return helper->chunk;
}

// A vector tail: only the first tail_size lanes of value count.
template <typename T, uint64_t kChunkSize>
inline T cascade_sum_combine(T& value, int64_t tail_size,
                             CascadeSumHelper<T, kChunkSize>* helper) {
  helper->chunk = T::set(helper->chunk, helper->chunk + value, tail_size);
  detail::countValue(helper);
  return helper->chunk;
}

template <typename T, uint64_t kChunkSize>
inline T cascade_sum_final(CascadeSumHelper<T, kChunkSize>* helper) {
  T result = helper->chunk;
  for (uint64_t j = 1; j < helper->depth; ++j)
    result = result + helper->levels[j];
  return result;
}

}  // namespace mydev_reduce
