// The myccl same-host transport: one POSIX shared-memory segment per process
// group, created by rank 0 and opened by the others by a name exchanged
// through the group's c10d Store.
//
// Layout: a header of per-rank sequence flags (each on its own cache line),
// then one data slot of kSlotBytes per rank. A collective is a series of
// "steps"; in step s every rank
//   1. waits until every rank has left step s-1 (depart[r] >= s-1), so that
//      no slot is still being read,
//   2. fills its own slot and publishes arrive[rank] = s (release),
//   3. waits until arrive[r] >= s for every rank (acquire),
//   4. reads the slots it needs, then publishes depart[rank] = s.
// Large tensors are split into chunks that fit a slot, one step per chunk.
// Every wait gives up after the group's timeout (or when a peer has set the
// abort word) with an error naming the collective, the rank and the peer.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace mydev::distributed {

class ShmTransport {
 public:
  static constexpr size_t kSlotBytes = size_t{4} << 20;
  static constexpr int kMaxRanks = 64;

  // Rendezvous through `store` (already prefixed for the group).
  ShmTransport(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
               std::chrono::milliseconds timeout);
  ~ShmTransport();
  ShmTransport(const ShmTransport&) = delete;
  ShmTransport& operator=(const ShmTransport&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  void setTimeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }

  void* slot(int rank) const {
    return static_cast<char*>(data_) + static_cast<size_t>(rank) * kSlotBytes;
  }

  // One step (see above): `fill` writes this rank's slot, `consume` reads
  // the slots after every rank has filled its own. `what` names the
  // collective in errors (a string literal).
  void step(uint64_t seq, const char* what, const std::function<void()>& fill,
            const std::function<void()>& consume);

  // Tells the peers to stop waiting (after a local failure).
  void abort();

 private:
  struct alignas(64) Flag {
    std::atomic<uint64_t> value;
  };
  struct Header {
    Flag arrive[kMaxRanks];
    Flag depart[kMaxRanks];
    Flag aborted;  // nonzero: 1 + the rank that aborted
  };

  void waitFlag(const Flag& flag, uint64_t target, const char* what, int peer,
                uint64_t seq, const char* phase);

  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  std::string name_;
  size_t bytes_ = 0;
  void* base_ = nullptr;
  Header* header_ = nullptr;
  void* data_ = nullptr;
};

}  // namespace mydev::distributed
