// myccl across hosts: the collectives ride on gloo's TCP transport. Each one
// runs as a kernel on the communication stream (CommStreamBackend) and hands
// gloo host views of the mydev tensors, so gloo reads and writes device
// memory in place.
//
// all_reduce hands the host view to gloo's own ring all-reduce where that
// keeps myccl's semantics: integer dtypes gloo has (exact in any order) and
// float32/float64 SUM, AVG and PRODUCT. Those floats come out in ring order:
// identical on every rank, as with NCCL, but with more than two ranks not
// always the shared-memory backend's rank-order bits. Everything else (int16,
// which gloo lacks; float16/bfloat16, which gloo reduces in their own
// precision; float MIN/MAX, where gloo drops NaNs; reduce, reduce_scatter)
// uses gloo only to move bytes and reduces with myccl's own rank-order
// reduction (reduction.h), bit-identical to the shared-memory backend.
//
// The gloo backend is torch's ProcessGroupGloo, created in Python (the CPU
// wheel ships no gloo headers) and driven through the c10d::Backend interface.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "comm_stream_backend.h"

namespace mydev::distributed {

class GlooTransportBackend : public CommStreamBackend {
 public:
  // `gloo`: a gloo c10d backend of the same ranks, on a store of its own.
  GlooTransportBackend(c10::intrusive_ptr<c10d::Backend> gloo,
                       std::chrono::milliseconds timeout);
  ~GlooTransportBackend() override;

  // A gloo send completes only once the peer posted the matching receive,
  // so the sends and receives of a batch (batch_isend_irecv) are all posted
  // first and waited for together at the end, as NCCL's group calls do.
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

 protected:
  c10::intrusive_ptr<c10d::Backend> createSubgroup(
      const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
      std::chrono::milliseconds timeout) override;
  // Gloo cannot be told to abort: a peer waiting for this rank fails at its
  // own timeout, or at once if this rank's process exits.
  void abortPeers() override {}

  MYCCL_TRANSPORT_KERNEL_OVERRIDES

 private:
  // A kernel that drives gloo; `body` gets the gloo backend and the timeout
  // of each gloo operation. A gloo failure becomes a myccl error naming the
  // collective (`name`) and this rank.
  Kernel glooKernel(const char* name,
                    std::function<void(c10d::Backend& gloo,
                                       std::chrono::milliseconds timeout)>
                        body);

  c10::intrusive_ptr<c10d::Backend> gloo_;
  // While coalescing: the batch's posted sends and receives (filled on the
  // communication stream), and how many were launched.
  std::shared_ptr<std::vector<c10::intrusive_ptr<c10d::Work>>> batch_;
  size_t batch_launched_ = 0;
};

}  // namespace mydev::distributed
