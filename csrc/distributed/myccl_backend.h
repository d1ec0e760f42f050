// myccl on one host: the processes of a group exchange through shared
// memory (shm_transport.h); collectives run on the communication stream as
// CommStreamBackend describes.
//
// Two algorithms, chosen per collective by message size (see the
// thresholds in myccl_backend.cpp): small messages are staged through the
// shared segment's slots (one synchronization per 4 MiB chunk, lowest
// latency); large ones read the peers' device buffers directly through the
// driver's peer-memory handles (peer_memory.h), without a staging copy.
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

#include "comm_stream_backend.h"
#include "collective_descriptor.h"
#include "peer_memory.h"
#include "shm_transport.h"

namespace mydev::distributed {

class MycclBackend : public CommStreamBackend {
 public:
  MycclBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
               std::chrono::milliseconds timeout);
  ~MycclBackend() override;

  c10::intrusive_ptr<c10d::Work> broadcast(
      std::vector<at::Tensor>& tensors,
      const c10d::BroadcastOptions& opts = c10d::BroadcastOptions()) override;
  c10::intrusive_ptr<c10d::Work> allreduce(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceOptions& opts = c10d::AllreduceOptions()) override;
  c10::intrusive_ptr<c10d::Work> allgather(
      std::vector<std::vector<at::Tensor>>& output_tensors,
      std::vector<at::Tensor>& input_tensors,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(
      at::Tensor& output_buffer, at::Tensor& input_buffer,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& output_tensors,
      std::vector<std::vector<at::Tensor>>& input_tensors,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output_tensor, at::Tensor& input_tensor,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce(
      std::vector<at::Tensor>& tensors,
      const c10d::ReduceOptions& opts = c10d::ReduceOptions()) override;
  c10::intrusive_ptr<c10d::Work> gather(
      std::vector<std::vector<at::Tensor>>& output_tensors,
      std::vector<at::Tensor>& input_tensors,
      const c10d::GatherOptions& opts = c10d::GatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> scatter(
      std::vector<at::Tensor>& output_tensors,
      std::vector<std::vector<at::Tensor>>& input_tensors,
      const c10d::ScatterOptions& opts = c10d::ScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(
      at::Tensor& output_buffer, at::Tensor& input_buffer,
      std::vector<int64_t>& output_split_sizes, std::vector<int64_t>& input_split_sizes,
      const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;
  c10::intrusive_ptr<c10d::Work> alltoall(
      std::vector<at::Tensor>& output_tensors, std::vector<at::Tensor>& input_tensors,
      const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;
  c10::intrusive_ptr<c10d::Work> barrier(
      const c10d::BarrierOptions& opts = c10d::BarrierOptions()) override;

  // Point to point (p2p_channel.h). Inside a coalescing group
  // (batch_isend_irecv) the operations are only recorded, and run together
  // as one kernel at endCoalescing(); the Works they return complete early,
  // the one of endCoalescing() when all of them have.
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank,
                                      int tag) override;
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

 private:
  struct P2PRequest {
    bool is_send;
    at::Tensor view;  // flat host view
    int peer;
    int64_t tag;
  };
  // What happens when the ranks cannot all map each other's memory.
  enum class PeerAccess { kUnknown, kYes, kNo };

  // launch() for a collective: `body(collective)` runs on the communication
  // stream with the group's collective number.
  c10::intrusive_ptr<c10d::Work> launchCollective(
      c10d::OpType type, const char* name, c10::Device device,
      const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs,
      std::function<void(uint64_t)> body);
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
  std::vector<char*> openPeers(CollectiveSteps& steps, PeerBuffer Descriptor::*which,
                               char* own);
  void count(Algorithm algorithm);
  void allgatherBody(uint64_t collective, const char* name, const at::Tensor& input,
                     const std::vector<at::Tensor>& outputs);
  void alltoallBody(uint64_t collective, const char* name, int32_t dtype,
                    const std::vector<at::Tensor>& inputs,
                    const std::vector<at::Tensor>& outputs);
  void runP2P(const std::vector<P2PRequest>& requests, const char* name);
  c10::intrusive_ptr<c10d::Work> pointToPoint(bool is_send, std::vector<at::Tensor>& tensors,
                                              int peer, int tag);

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
