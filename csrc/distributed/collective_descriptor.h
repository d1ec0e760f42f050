// What one rank's call of a collective looks like. Every rank publishes its
// descriptor in the collective's first step (shm_transport.h) and checks all
// of them before any data moves, so that ranks that called different
// collectives, or the same one on mismatched tensors, all fail with an
// error naming both sides instead of hanging or reading out of bounds.
// The descriptor also carries the handles of the rank's device buffers, for
// the algorithms that read peers' memory directly (peer_memory.h).
#pragma once

#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <cstdint>

#include "../runtime/mydev_runtime.h"

namespace mydev::distributed {

constexpr int kMaxRanks = 64;

// How the collective moves its data; every rank must pick the same.
enum class Algorithm : int32_t {
  kStaged = 1,  // through the shared segment's slots (lowest latency)
  kDirect = 2,  // peers read each other's device buffers (no staging copy)
};

// A device buffer as a peer can open it: the IPC handle of its allocation
// and the buffer's offset in it.
struct PeerBuffer {
  mydevIpcMemHandle_t handle;
  uint64_t offset;
  uint64_t published;  // 0: no buffer (nothing to send)
};

struct Descriptor {
  uint64_t collective;  // the group's collective number
  int32_t kind;         // c10d::OpType
  int32_t dtype;        // at::ScalarType
  int64_t numel;        // elements of this rank's piece (see each collective)
  int32_t root;         // -1 if the collective has none
  int32_t reduce_op;    // -1 if the collective does not reduce
  int32_t algorithm;    // Algorithm
  int32_t has_counts;   // all_to_all: counts below are meaningful
  int64_t send_counts[kMaxRanks];  // all_to_all: elements to each rank
  int64_t recv_counts[kMaxRanks];  // all_to_all: elements from each rank
  PeerBuffer input;                // direct algorithms
  PeerBuffer output;
  PeerBuffer parts[kMaxRanks];  // all_to_all: this rank's piece per rank
};

// Throws DistBackendError, on every rank alike, unless all `size`
// descriptors describe the same call as this rank's (`all[rank]`).
void checkDescriptors(const Descriptor* all, int rank, int size,
                      const char* what);

}  // namespace mydev::distributed
