#include "gloo_transport_backend.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <numeric>
#include <optional>
#include <string>
#include <utility>

#include "collective_checks.h"
#include "reduction.h"

namespace mydev::distributed {

namespace {

using Millis = std::chrono::milliseconds;

// What gloo moves: the bytes of a (contiguous) host view, so every dtype
// travels alike, int16 and bool included.
at::Tensor bytesOf(const at::Tensor& host_view) {
  return host_view.view(-1).view(at::kByte);
}

std::vector<at::Tensor> bytesOf(const std::vector<at::Tensor>& host_views) {
  std::vector<at::Tensor> bytes;
  bytes.reserve(host_views.size());
  for (const at::Tensor& view : host_views) {
    bytes.push_back(bytesOf(view));
  }
  return bytes;
}

std::string firstLine(const std::exception& error) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&error);
  std::string text =
      c10_error ? c10_error->what_without_backtrace() : error.what();
  return text.substr(0, text.find('\n'));
}

[[noreturn]] void throwTransportError(const char* name, int rank,
                                      Millis timeout,
                                      const std::exception& error) {
  const std::string detail = firstLine(error);
  if (detail.find("Timed out") != std::string::npos ||
      detail.find("timed out") != std::string::npos) {
    throwDistError(c10::str("myccl: ", name, " timed out on rank ", rank,
                            " after ", timeout.count(),
                            " ms in gloo's TCP transport (a peer did not "
                            "take part in time): ",
                            detail));
  }
  const bool peer_lost = detail.find("Connection") != std::string::npos ||
                         detail.find("closed") != std::string::npos;
  throwDistError(c10::str(
      "myccl: ", name, " failed on rank ", rank, " in gloo's TCP transport",
      peer_lost ? " (a peer exited or dropped its connection)" : "", ": ",
      detail));
}

// Elements of each rank's segment when `numel` elements are cut into one
// segment per rank (the last ones may be shorter, or empty).
std::vector<int64_t> segmentCounts(int64_t numel, int size) {
  const int64_t segment = (numel + size - 1) / size;
  std::vector<int64_t> counts;
  for (int r = 0; r < size; ++r) {
    counts.push_back(std::clamp<int64_t>(numel - r * segment, 0, segment));
  }
  return counts;
}

// Rank-ordered reduce-scatter: `input` (a typed host view) holds one segment
// per rank, `counts[d]` elements for rank d; `out` receives the reduction of
// every rank's segment for this rank. An all-to-all brings those segments
// here, then reduceInto combines them rank 0 first, like the shm backend.
void reduceScatterInto(c10d::Backend& gloo, const at::Tensor& input,
                       const std::vector<int64_t>& counts,
                       const at::Tensor& out, c10d::ReduceOp::RedOpType op,
                       Millis timeout) {
  const int size = static_cast<int>(counts.size());
  const int64_t elem = input.element_size();
  const int64_t mine = counts[gloo.getRank()] * elem;
  at::Tensor received = at::empty({size * mine}, at::kByte);
  at::Tensor sent = bytesOf(input);
  std::vector<int64_t> receive_splits(size, mine);
  std::vector<int64_t> send_splits;
  for (const int64_t count : counts) {
    send_splits.push_back(count * elem);
  }
  c10d::AllToAllOptions opts;
  opts.timeout = timeout;
  gloo.alltoall_base(received, sent, receive_splits, send_splits, opts)->wait();
  std::vector<at::Tensor> parts;
  for (int r = 0; r < size; ++r) {
    parts.push_back(
        received.narrow(0, r * mine, mine).view(input.scalar_type()));
  }
  reduceInto(out, parts, op);
}

// All-reduce (no root) and reduce (a root): a reduce-scatter, then the
// reduced segments gathered into `view` on every rank, or on the root only.
// Each rank sends and receives about twice the tensor, as in a ring
// all-reduce.
void reduceThenGather(c10d::Backend& gloo, const at::Tensor& view,
                      c10d::ReduceOp::RedOpType op, std::optional<int64_t> root,
                      Millis timeout) {
  const int size = gloo.getSize();
  const int64_t numel = view.numel();
  if (numel == 0) {
    return;
  }
  const std::vector<int64_t> counts = segmentCounts(numel, size);
  const int64_t segment = counts[0];
  // Padded to a full segment: gloo gathers equal sizes only.
  at::Tensor reduced = at::empty({segment}, view.options());
  reduceScatterInto(gloo, view, counts,
                    reduced.narrow(0, 0, counts[gloo.getRank()]), op, timeout);
  const bool receives = !root || gloo.getRank() == *root;
  const bool in_place = numel == segment * size;
  at::Tensor gathered;
  if (receives) {
    gathered = in_place ? view : at::empty({segment * size}, view.options());
  }
  at::Tensor reduced_bytes = bytesOf(reduced);
  if (root) {
    std::vector<std::vector<at::Tensor>> outputs;
    if (receives) {
      outputs.push_back(bytesOf(at::split(gathered, segment)));
    }
    std::vector<at::Tensor> inputs{reduced_bytes};
    c10d::GatherOptions o;
    o.rootRank = *root;
    o.timeout = timeout;
    gloo.gather(outputs, inputs, o)->wait();
  } else {
    at::Tensor gathered_bytes = bytesOf(gathered);
    c10d::AllgatherOptions o;
    o.timeout = timeout;
    gloo._allgather_base(gathered_bytes, reduced_bytes, o)->wait();
  }
  if (receives && !in_place) {
    view.copy_(gathered.narrow(0, 0, numel));
  }
}

// Whether gloo's own all-reduce gives the result myccl promises, so the
// tensor can be handed to it as it is. Integer arithmetic is exact in any
// order (a wraparound wraps alike), so every op qualifies for the integer
// dtypes gloo has (not int16). float32/float64 SUM, AVG and PRODUCT come out
// of gloo's ring in ring order rather than rank order: every rank still gets
// the same bits (each element is reduced on one rank and then copied to the
// others), as with NCCL, but not necessarily the shared-memory backend's bits
// once there are more than two ranks. Float MIN and MAX stay with myccl: gloo
// lets a NaN lose to a number where torch.minimum/maximum propagate it.
// float16/bfloat16 stay too: gloo would reduce them in their own precision.
bool glooAllreduceKeepsSemantics(at::ScalarType dtype,
                                 c10d::ReduceOp::RedOpType op) {
  switch (dtype) {
    case at::kByte:
    case at::kChar:
    case at::kInt:
    case at::kLong: return true;
    case at::kFloat:
    case at::kDouble:
      return op != c10d::ReduceOp::MIN && op != c10d::ReduceOp::MAX;
    default: return false;
  }
}

// All-reduce in place by gloo's ring (see glooAllreduceKeepsSemantics). AVG
// is a SUM divided afterwards, truncating for integers as reduceBuffers does:
// gloo has no integer AVG.
void glooAllreduce(c10d::Backend& gloo, const at::Tensor& view,
                   c10d::ReduceOp::RedOpType op, Millis timeout) {
  if (view.numel() == 0) {
    return;
  }
  std::vector<at::Tensor> tensors{view};
  c10d::AllreduceOptions o;
  o.reduceOp = op == c10d::ReduceOp::AVG ? c10d::ReduceOp::SUM : op;
  o.timeout = timeout;
  gloo.allreduce(tensors, o)->wait();
  if (op == c10d::ReduceOp::AVG) {
    const int64_t size = gloo.getSize();
    if (at::isFloatingType(view.scalar_type())) {
      view.div_(size);
    } else {
      view.div_(size, "trunc");
    }
  }
}

}  // namespace

GlooTransportBackend::GlooTransportBackend(
    c10::intrusive_ptr<c10d::Backend> gloo, Millis timeout)
    : CommStreamBackend(gloo->getRank(), gloo->getSize(), timeout),
      gloo_(std::move(gloo)) {
  TORCH_CHECK(gloo_->getBackendName() == "gloo",
              "myccl: the cross-host transport needs a gloo backend, got ",
              gloo_->getBackendName());
}

GlooTransportBackend::~GlooTransportBackend() { drain(); }

c10::intrusive_ptr<c10d::Backend> GlooTransportBackend::createSubgroup(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    Millis timeout) {
  // merge() builds a gloo backend over any store, rank and size, sharing
  // this one's transport device (as gloo's own split() does); it is the one
  // way to make a gloo backend from C++ without gloo's headers.
  auto gloo = gloo_->merge(store, gloo_->getBackendOptions(), rank, size);
  return c10::make_intrusive<GlooTransportBackend>(std::move(gloo), timeout);
}

CommStreamBackend::Kernel GlooTransportBackend::glooKernel(
    const char* name, std::function<void(c10d::Backend&, Millis)> body) {
  return [gloo = gloo_, body = std::move(body), name, rank = rank_,
          timeout = timeout()] {
    try {
      body(*gloo, timeout);
    } catch (const std::exception& error) {
      throwTransportError(name, rank, timeout, error);
    }
  };
}

CommStreamBackend::Kernel GlooTransportBackend::broadcastKernel(
    const at::Tensor& view, int root) {
  return glooKernel("broadcast",
                    [view, root](c10d::Backend& gloo, Millis timeout) {
                      std::vector<at::Tensor> moved{bytesOf(view)};
                      c10d::BroadcastOptions o;
                      o.rootRank = root;
                      o.timeout = timeout;
                      gloo.broadcast(moved, o)->wait();
                    });
}

CommStreamBackend::Kernel GlooTransportBackend::allreduceKernel(
    const at::Tensor& view, ReduceOp op) {
  const bool by_gloo = glooAllreduceKeepsSemantics(view.scalar_type(), op);
  return glooKernel("allreduce",
                    [view, op, by_gloo](c10d::Backend& gloo, Millis timeout) {
                      if (by_gloo) {
                        glooAllreduce(gloo, view, op, timeout);
                      } else {
                        reduceThenGather(gloo, view, op, std::nullopt, timeout);
                      }
                    });
}

CommStreamBackend::Kernel GlooTransportBackend::reduceKernel(
    const at::Tensor& view, ReduceOp op, int root) {
  // Never gloo's own reduce, whatever the dtype: it reduces in place in every
  // rank's buffer and leaves partial results on the non-root ranks, whose
  // tensors myccl (as NCCL) leaves untouched; keeping them would take a copy,
  // and its ring moves no fewer bytes than reduceThenGather.
  return glooKernel("reduce",
                    [view, op, root](c10d::Backend& gloo, Millis timeout) {
                      reduceThenGather(gloo, view, op, int64_t{root}, timeout);
                    });
}

CommStreamBackend::Kernel GlooTransportBackend::allgatherKernel(
    const char* name, const at::Tensor& in,
    const std::vector<at::Tensor>& views) {
  return glooKernel(name, [views, in](c10d::Backend& gloo, Millis timeout) {
    std::vector<std::vector<at::Tensor>> received{bytesOf(views)};
    std::vector<at::Tensor> sent{bytesOf(in)};
    c10d::AllgatherOptions o;
    o.timeout = timeout;
    gloo.allgather(received, sent, o)->wait();
  });
}

CommStreamBackend::Kernel GlooTransportBackend::allgatherIntoTensorKernel(
    const at::Tensor& in, const at::Tensor& out) {
  return glooKernel("_allgather_base",
                    [out, in](c10d::Backend& gloo, Millis timeout) {
                      at::Tensor received = bytesOf(out);
                      at::Tensor sent = bytesOf(in);
                      c10d::AllgatherOptions o;
                      o.timeout = timeout;
                      gloo._allgather_base(received, sent, o)->wait();
                    });
}

CommStreamBackend::Kernel GlooTransportBackend::reduceScatterKernel(
    const at::Tensor& in, const at::Tensor& out, ReduceOp op) {
  return glooKernel("_reduce_scatter_base", [in, out, op](c10d::Backend& gloo,
                                                          Millis timeout) {
    const std::vector<int64_t> counts(gloo.getSize(), out.numel());
    reduceScatterInto(gloo, in, counts, out, op, timeout);
  });
}

CommStreamBackend::Kernel GlooTransportBackend::gatherKernel(
    const at::Tensor& in, const std::vector<at::Tensor>& views, int root) {
  return glooKernel("gather",
                    [views, in, root](c10d::Backend& gloo, Millis timeout) {
                      std::vector<std::vector<at::Tensor>> received;
                      if (!views.empty()) {
                        received.push_back(bytesOf(views));
                      }
                      std::vector<at::Tensor> sent{bytesOf(in)};
                      c10d::GatherOptions o;
                      o.rootRank = root;
                      o.timeout = timeout;
                      gloo.gather(received, sent, o)->wait();
                    });
}

CommStreamBackend::Kernel GlooTransportBackend::scatterKernel(
    const std::vector<at::Tensor>& views, const at::Tensor& out, int root) {
  return glooKernel("scatter",
                    [views, out, root](c10d::Backend& gloo, Millis timeout) {
                      std::vector<at::Tensor> received{bytesOf(out)};
                      std::vector<std::vector<at::Tensor>> sent;
                      if (!views.empty()) {
                        sent.push_back(bytesOf(views));
                      }
                      c10d::ScatterOptions o;
                      o.rootRank = root;
                      o.timeout = timeout;
                      gloo.scatter(received, sent, o)->wait();
                    });
}

namespace {

// Rows of dim 0 per rank as byte counts of the flat tensor.
std::vector<int64_t> rowBytes(const at::Tensor& tensor,
                              std::vector<int64_t> rows) {
  const int64_t row_bytes =
      tensor.size(0) == 0
          ? 0
          : tensor.numel() / tensor.size(0) * tensor.element_size();
  for (int64_t& r : rows) {
    r *= row_bytes;
  }
  return rows;
}

bool equalSizes(const std::vector<at::Tensor>& bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [&](const at::Tensor& b) {
    return b.numel() == bytes[0].numel();
  });
}

std::vector<int64_t> byteCounts(const std::vector<at::Tensor>& bytes) {
  std::vector<int64_t> counts;
  for (const at::Tensor& b : bytes) {
    counts.push_back(b.numel());
  }
  return counts;
}

int64_t totalBytes(const std::vector<at::Tensor>& bytes) {
  const std::vector<int64_t> counts = byteCounts(bytes);
  return std::accumulate(counts.begin(), counts.end(), int64_t{0});
}

}  // namespace

CommStreamBackend::Kernel GlooTransportBackend::alltoallBaseKernel(
    const at::Tensor& in, const at::Tensor& out, const AlltoallRows& rows) {
  std::vector<int64_t> receive_splits = rowBytes(out, rows.output);
  std::vector<int64_t> send_splits = rowBytes(in, rows.input);
  return glooKernel("all_to_all", [in, out, receive_splits, send_splits](
                                      c10d::Backend& gloo,
                                      Millis timeout) mutable {
    at::Tensor received = bytesOf(out);
    at::Tensor sent = bytesOf(in);
    c10d::AllToAllOptions o;
    o.timeout = timeout;
    gloo.alltoall_base(received, sent, receive_splits, send_splits, o)->wait();
  });
}

CommStreamBackend::Kernel GlooTransportBackend::alltoallKernel(
    const std::vector<at::Tensor>& inputs,
    const std::vector<at::Tensor>& outputs) {
  return glooKernel("all_to_all", [inputs, outputs](c10d::Backend& gloo,
                                                    Millis timeout) {
    std::vector<at::Tensor> received = bytesOf(outputs);
    std::vector<at::Tensor> sent = bytesOf(inputs);
    c10d::AllToAllOptions o;
    o.timeout = timeout;
    if (equalSizes(received) && equalSizes(sent)) {
      gloo.alltoall(received, sent, o)->wait();
      return;
    }
    // Gloo's list form takes equal sizes only: stage through
    // the split-size form.
    at::Tensor staged_in = at::cat(sent);
    at::Tensor staged_out = at::empty({totalBytes(received)}, at::kByte);
    std::vector<int64_t> receive_splits = byteCounts(received);
    std::vector<int64_t> send_splits = byteCounts(sent);
    gloo.alltoall_base(staged_out, staged_in, receive_splits, send_splits, o)
        ->wait();
    int64_t offset = 0;
    for (const at::Tensor& out : received) {
      out.copy_(staged_out.narrow(0, offset, out.numel()));
      offset += out.numel();
    }
  });
}

CommStreamBackend::Kernel GlooTransportBackend::pointToPointKernel(
    bool is_send, const at::Tensor& view, int peer, int tag) {
  std::shared_ptr<std::vector<c10::intrusive_ptr<c10d::Work>>> batch = batch_;
  if (batch) {
    ++batch_launched_;
  }
  return glooKernel(
      is_send ? "send" : "recv",
      [view, is_send, peer, tag, batch](c10d::Backend& gloo, Millis timeout) {
        std::vector<at::Tensor> moved{bytesOf(view)};
        auto work =
            is_send ? gloo.send(moved, peer, tag) : gloo.recv(moved, peer, tag);
        if (batch) {
          batch->push_back(std::move(work));  // endCoalescing waits
        } else {
          work->wait(timeout);
        }
      });
}

void GlooTransportBackend::startCoalescing() {
  CommStreamBackend::startCoalescing();
  batch_ = std::make_shared<std::vector<c10::intrusive_ptr<c10d::Work>>>();
  batch_launched_ = 0;
}

c10::intrusive_ptr<c10d::Work> GlooTransportBackend::endCoalescing() {
  const auto batch = std::exchange(batch_, nullptr);
  if (batch && batch_launched_ > 0) {
    // Launched while still coalescing, so the batch's Work ends with it.
    launch(c10d::OpType::COALESCED, "batch_isend_irecv",
           defaultDevice(std::nullopt), {}, {},
           glooKernel("batch_isend_irecv",
                      [batch](c10d::Backend& /*gloo*/, Millis timeout) {
                        for (const auto& work : *batch) {
                          work->wait(timeout);
                        }
                      }));
  }
  return CommStreamBackend::endCoalescing();
}

CommStreamBackend::Kernel GlooTransportBackend::barrierKernel() {
  return glooKernel("barrier", [](c10d::Backend& gloo, Millis timeout) {
    c10d::BarrierOptions o;
    o.timeout = timeout;
    gloo.barrier(o)->wait();
  });
}

}  // namespace mydev::distributed
