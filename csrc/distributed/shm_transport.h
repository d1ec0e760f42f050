// The myccl same-host transport: one POSIX shared-memory segment per process
// group, created by rank 0 and opened by the others by a name exchanged
// through the group's c10d Store.
//
// Layout: a header of per-rank sequence flags (each on its own cache line)
// and per-rank collective descriptors (collective_descriptor.h), then one
// data slot of kSlotBytes per rank, then one point-to-point channel per
// ordered pair of ranks (p2p_channel.h).
//
// Collective c of the group uses the step numbers c * kStepsPerCollective
// + k, k = 0, 1, ...; the number of steps may depend on what the first step
// exchanged (every rank sees the same and decides alike). In step s every
// rank
//   1. waits until every rank has left step s-1 (depart[r] >= s-1), so that
//      no slot and no descriptor is still being read,
//   2. fills its own slot and publishes arrive[rank] = s (release),
//   3. waits until arrive[r] >= s for every rank (acquire),
//   4. reads the slots it needs, then publishes depart[rank] = s.
// A rank that finished collective c publishes depart = the last step number
// of c, which is where collective c + 1's first step waits.
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

#include "collective_descriptor.h"
#include "p2p_channel.h"

namespace mydev::distributed {

class ShmTransport {
 public:
  static constexpr size_t kSlotBytes = size_t{4} << 20;
  static constexpr uint64_t kStepsPerCollective = uint64_t{1} << 20;

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
  Descriptor& descriptor(int rank) const { return header_->descriptors[rank]; }
  P2PChannel& channel(int from, int to) const {
    return channels_[static_cast<size_t>(from) * static_cast<size_t>(size_) +
                     static_cast<size_t>(to)];
  }

  // One step (see above): `fill` writes this rank's slot, `consume` reads
  // the slots after every rank has filled its own. `what` names the
  // collective in errors (a string literal).
  void step(uint64_t seq, const char* what, const std::function<void()>& fill,
            const std::function<void()>& consume);
  // This rank is done with every step up to `seq`; with `wait_for_peers`,
  // also waits until every rank is (so that no peer still reads this rank's
  // buffers).
  void depart(uint64_t seq, const char* what, bool wait_for_peers);

  // Whether a rank could map its peers' memory: each rank publishes its
  // own answer, and reads the others' in a later step.
  enum class PeerProbe : uint64_t { kNotTried = 0, kFailed = 1, kMapped = 2 };
  void publishPeerProbe(PeerProbe probe);
  PeerProbe peerProbe(int rank) const;

  // Spins (then sleeps) until `ready()` is true; gives up after the timeout
  // or when a peer aborted, with an error saying what this rank waited for.
  void waitUntil(const std::function<bool()>& ready, const char* what,
                 const std::function<std::string()>& waiting_for);

  // Tells the peers to stop waiting (after a local failure).
  void abort();

 private:
  // A waiter spins briefly, then sleeps on a futex over the value's low
  // word (shared between processes): on a loaded machine a spinning waiter
  // would take the core from the very peer it waits for.
  struct alignas(64) Flag {
    std::atomic<uint64_t> value;
    std::atomic<uint32_t> sleepers;
  };
  struct Header {
    Flag arrive[kMaxRanks];
    Flag depart[kMaxRanks];
    Flag peer_probe[kMaxRanks];  // PeerProbe
    Flag aborted;                // nonzero: 1 + the rank that aborted
    Descriptor descriptors[kMaxRanks];
  };

  static void publish(Flag& flag, uint64_t value);
  void waitFlag(Flag& flag, uint64_t target, const char* what, int peer,
                uint64_t seq, const char* phase);
  [[noreturn]] void throwAborted(const char* what, uint64_t aborted,
                                 const std::string& waiting_for);

  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  std::string name_;
  size_t bytes_ = 0;
  void* base_ = nullptr;
  Header* header_ = nullptr;
  void* data_ = nullptr;
  P2PChannel* channels_ = nullptr;
};

// The steps of one collective on one rank (run on the communication
// stream). The first step also publishes this rank's descriptor and checks
// every rank's before anything else is read.
class CollectiveSteps {
 public:
  CollectiveSteps(ShmTransport& transport, uint64_t collective,
                  const char* what, const Descriptor& mine);

  void step(const std::function<void()>& fill = nullptr,
            const std::function<void()>& consume = nullptr);
  // The collective is over on this rank; see ShmTransport::depart.
  void finish(bool wait_for_peers);

  const Descriptor& descriptor(int rank) const {
    return transport_.descriptor(rank);
  }
  ShmTransport& transport() { return transport_; }
  const char* what() const { return what_; }

 private:
  ShmTransport& transport_;
  const uint64_t first_;
  uint64_t next_;
  const char* what_;
  const Descriptor& mine_;
};

}  // namespace mydev::distributed
