// What the shared-memory collectives (shm_transport_backend*.cpp) share:
// the algorithm thresholds, and the arithmetic of cutting a message into
// slot-sized chunks that move one group-wide step at a time.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "collective_descriptor.h"
#include "shm_transport.h"

namespace mydev::distributed::shm_chunks {

constexpr size_t kSlotBytes = ShmTransport::kSlotBytes;

// From these message sizes on, the direct algorithms are used. Staging
// costs one group-wide synchronization per 4 MiB chunk plus two copies of
// every byte (into a slot, out of it); direct costs two synchronizations
// (publish buffers, then wait until every peer is done with ours) and no
// staging copy. With benchmarks/collectives.py on the 2-core dev host
// (float32, 2 and 4 ranks, loaded): staged 64 KiB all_reduce 30-60 us,
// direct 1 MiB 100-120 us at 8-10 GB/s bus bandwidth. The crossover was
// set to 256 KiB from these runs and not tuned finer (the machine's load
// moves it more than the algorithms do).
constexpr size_t kDirectAllreduceBytes = size_t{256} << 10;
constexpr size_t kDirectCopyBytes = size_t{256}
                                    << 10;  // gather, scatter, broadcast
// The direct all-reduce writes each reduced piece to every rank while the
// piece is still in this core's L2.
constexpr size_t kReducePieceBytes = size_t{128} << 10;

inline char* bytesOf(const at::Tensor& host_view) {
  return static_cast<char*>(host_view.data_ptr());
}

inline uint64_t chunksOf(int64_t numel, int64_t per_chunk) {
  // An empty tensor still takes one step: the first step exchanges the
  // descriptors.
  return numel == 0
             ? 1
             : static_cast<uint64_t>((numel + per_chunk - 1) / per_chunk);
}

// Calls `chunk(offset, length)` for each piece of `numel` elements, `per`
// at a time, in order (see chunksOf).
template <typename Chunk>
void forEachChunk(int64_t numel, int64_t per, Chunk&& chunk) {
  const uint64_t chunks = chunksOf(numel, per);
  for (uint64_t c = 0; c < chunks; ++c) {
    const int64_t off = static_cast<int64_t>(c) * per;
    chunk(off, std::min(per, numel - off));
  }
}

// The first element of rank `r`'s slice when `numel` elements are split in
// `size` nearly equal slices.
inline int64_t sliceBegin(int64_t numel, int size, int r) {
  return numel * r / size;
}

inline Descriptor describe(uint64_t collective, c10d::OpType kind,
                           at::ScalarType dtype, int64_t numel, int root = -1,
                           int reduce_op = -1) {
  Descriptor d{};
  d.collective = collective;
  d.kind = static_cast<int32_t>(kind);
  d.dtype = static_cast<int32_t>(dtype);
  d.numel = numel;
  d.root = root;
  d.reduce_op = reduce_op;
  d.algorithm = static_cast<int32_t>(
      Algorithm::kStaged);  // unless chooseAlgorithm says direct
  return d;
}

inline void copyBytes(char* dst, const char* src, size_t bytes) {
  if (dst != src && bytes > 0) {
    std::memcpy(dst, src, bytes);
  }
}

}  // namespace mydev::distributed::shm_chunks
