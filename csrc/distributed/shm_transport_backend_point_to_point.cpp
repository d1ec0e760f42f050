// Point to point over the transport's per-pair channels (p2p_channel.h),
// single or batched by batch_isend_irecv's coalescing group.
#include "shm_transport_backend.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <vector>

#include "shm_transport_backend_chunks.h"

namespace mydev::distributed {

using namespace shm_chunks;  // NOLINT(build/namespaces): this file's toolkit

// ------------------------------------------------------------- point to point

void ShmTransportBackend::runP2P(const std::vector<P2PRequest>& requests,
                                 const char* name) {
  ShmTransport& transport = *transport_;
  const int rank = transport.rank();
  std::vector<P2POperation> operations;
  operations.reserve(requests.size());
  for (const P2PRequest& request : requests) {
    P2PChannel& channel = request.is_send
                              ? transport.channel(rank, request.peer)
                              : transport.channel(request.peer, rank);
    operations.emplace_back(channel, request.is_send, bytesOf(request.view),
                            request.view.numel(),
                            static_cast<int32_t>(request.view.scalar_type()),
                            static_cast<size_t>(request.view.nbytes()),
                            request.tag, rank, request.peer);
  }
  // All operations advance together: a receive that cannot finish yet does
  // not hold back a send that the peer waits for. But one channel carries
  // one message at a time, in the batch's order: two sends to the same peer
  // interleaving their chunks would hand the receiver a chunk of the wrong
  // message.
  transport.waitUntil(
      [&] {
        bool all_done = true;
        std::vector<const P2PChannel*> channels_in_use;
        for (P2POperation& operation : operations) {
          if (operation.done()) {
            continue;
          }
          all_done = false;
          const P2PChannel* channel = &operation.channel();
          if (std::find(channels_in_use.begin(), channels_in_use.end(),
                        channel) != channels_in_use.end()) {
            continue;
          }
          if (!operation.progress()) {
            channels_in_use.push_back(channel);
          }
        }
        return all_done;
      },
      name,
      [&] {
        for (const P2POperation& operation : operations) {
          if (!operation.done()) {
            return operation.waitingFor();
          }
        }
        return std::string("nothing");
      });
}

CommStreamBackend::Kernel ShmTransportBackend::pointToPointKernel(
    bool is_send, const at::Tensor& view, int peer, int tag) {
  const P2PRequest request{is_send, view, peer, tag};
  if (p2p_batch_) {
    p2p_batch_->push_back(request);
    return [] {};
  }
  const char* name = is_send ? "send" : "recv";
  return [this, request, name] { runP2P({request}, name); };
}

void ShmTransportBackend::startCoalescing() {
  CommStreamBackend::startCoalescing();
  p2p_batch_.emplace();
}

c10::intrusive_ptr<c10d::Work> ShmTransportBackend::endCoalescing() {
  if (p2p_batch_ && !p2p_batch_->empty()) {
    std::vector<P2PRequest> batch = std::move(*p2p_batch_);
    // Launched while the base still coalesces: its Work is the last one,
    // which the coalesced Work completes with.
    launch(c10d::OpType::COALESCED, "batch_isend_irecv",
           defaultDevice(std::nullopt), {}, {},
           [this, batch = std::move(batch)] {
             runP2P(batch, "batch_isend_irecv");
           });
  }
  p2p_batch_.reset();
  return CommStreamBackend::endCoalescing();
}

}  // namespace mydev::distributed
