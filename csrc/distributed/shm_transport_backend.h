// myccl on one host: the processes of a group exchange through shared
// memory (shm_transport.h); collectives run on the communication stream as
// CommStreamBackend describes.
//
// Two algorithms, chosen per collective by message size (see the
// thresholds in shm_transport_backend_chunks.h): small messages are staged
// through the shared segment's slots (one synchronization per 4 MiB chunk,
// lowest latency); large ones read the peers' device buffers directly through
// the driver's peer-memory handles (peer_memory.h), without a staging copy.
// MYCCL_ALGO=staged|direct forces one (direct still falls back to staged
// when the ranks cannot map each other's memory).
#pragma once

#include <c10/util/FunctionRef.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "collective_descriptor.h"
#include "comm_stream_backend.h"
#include "peer_memory.h"
#include "shm_transport.h"

namespace mydev::distributed {

class ShmTransportBackend : public CommStreamBackend {
 public:
  ShmTransportBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                      int size, std::chrono::milliseconds timeout);
  ~ShmTransportBackend() override;

  // Point to point (p2p_channel.h). Inside a coalescing group
  // (batch_isend_irecv) the operations are only recorded, and run together
  // as one kernel at endCoalescing(); the Works they return complete early,
  // the one of endCoalescing() when all of them have.
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

  // How many collectives ran with each algorithm ("direct", "staged"), for
  // tests and benchmarks.
  std::map<std::string, uint64_t> algorithmCounts() const;

 protected:
  c10::intrusive_ptr<c10d::Backend> createSubgroup(
      const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
      std::chrono::milliseconds timeout) override;
  void abortPeers() override;
  void onTimeoutChanged(std::chrono::milliseconds timeout) override;

  MYCCL_TRANSPORT_KERNEL_OVERRIDES

 private:
  struct P2PRequest {
    bool is_send;
    at::Tensor view;  // flat host view
    int peer;
    int64_t tag;
  };
  // What happens when the ranks cannot all map each other's memory.
  enum class PeerAccess { kUnknown, kYes, kNo };

  // The kernel of a collective: `body(collective)` runs on the
  // communication stream with the group's next collective number.
  Kernel numbered(std::function<void(uint64_t)> body);
  // Executor side: sets `mine.algorithm` for a message of `bytes` (the same
  // on every rank that called the same collective); a direct collective
  // publishes `buffer` (a host view), if given, as the input its peers read.
  void chooseAlgorithm(Descriptor& mine, size_t bytes, size_t direct_from_bytes,
                       const at::Tensor* buffer) const;
  // Executor side, what every collective does around moving its data: `mine`
  // goes out in the first step; a direct collective whose ranks can all map
  // each other's memory runs `direct`, then waits until no peer reads this
  // rank's buffers any more; any other runs `staged` (which may take the
  // first step, unless the direct attempt did).
  void runSteps(const Descriptor& mine, const char* name,
                c10::function_ref<void(CollectiveSteps&)> direct,
                c10::function_ref<void(CollectiveSteps&)> staged);
  // After the first step of a direct collective: whether every rank can map
  // every peer's memory (probed once per group, costing one more step).
  bool peersReachable(CollectiveSteps& steps);
  // Every rank's buffer named by `which` in its descriptor, mapped here
  // (this rank's own at `own`).
  std::vector<char*> openPeers(CollectiveSteps& steps,
                               PeerBuffer Descriptor::*which, char* own);
  void count(Algorithm algorithm);
  void allgatherBody(uint64_t collective, const char* name,
                     const at::Tensor& input,
                     const std::vector<at::Tensor>& outputs);
  void alltoallBody(uint64_t collective, const char* name, int32_t dtype,
                    const std::vector<at::Tensor>& inputs,
                    const std::vector<at::Tensor>& outputs);
  void runP2P(const std::vector<P2PRequest>& requests, const char* name);

  std::unique_ptr<ShmTransport> transport_;
  uint64_t next_collective_ = 1;
  // MYCCL_ALGO: nullopt = by size.
  std::optional<Algorithm> forced_;
  // Executor-only state.
  PeerAccess peer_access_ = PeerAccess::kUnknown;
  PeerMemory peers_;
  std::atomic<uint64_t> direct_runs_{0};
  std::atomic<uint64_t> staged_runs_{0};
  // The point-to-point operations of the open coalescing group.
  std::optional<std::vector<P2PRequest>> p2p_batch_;
};

}  // namespace mydev::distributed
