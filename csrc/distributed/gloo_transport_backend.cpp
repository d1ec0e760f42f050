#include "gloo_transport_backend.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <utility>

#include "../aten/host_view.h"
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
  std::string text = c10_error ? c10_error->what_without_backtrace() : error.what();
  return text.substr(0, text.find('\n'));
}

[[noreturn]] void throwTransportError(const char* name, int rank, Millis timeout,
                                      const std::exception& error) {
  const std::string detail = firstLine(error);
  if (detail.find("Timed out") != std::string::npos ||
      detail.find("timed out") != std::string::npos) {
    throwDistError(c10::str("myccl: ", name, " timed out on rank ", rank, " after ",
                            timeout.count(), " ms in gloo's TCP transport (a peer did not "
                            "take part in time): ", detail));
  }
  const bool peer_lost = detail.find("Connection") != std::string::npos ||
                         detail.find("closed") != std::string::npos;
  throwDistError(c10::str("myccl: ", name, " failed on rank ", rank, " in gloo's TCP transport",
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
                       const std::vector<int64_t>& counts, const at::Tensor& out,
                       c10d::ReduceOp::RedOpType op, Millis timeout) {
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
    parts.push_back(received.narrow(0, r * mine, mine).view(input.scalar_type()));
  }
  reduceInto(out, parts, op);
}

}  // namespace

MycclGlooBackend::MycclGlooBackend(c10::intrusive_ptr<c10d::Backend> gloo, Millis timeout)
    : CommStreamBackend(gloo->getRank(), gloo->getSize(), timeout), gloo_(std::move(gloo)) {
  TORCH_CHECK(gloo_->getBackendName() == "gloo",
              "myccl: the cross-host transport needs a gloo backend, got ",
              gloo_->getBackendName());
}

MycclGlooBackend::~MycclGlooBackend() { drain(); }

c10::intrusive_ptr<c10d::Backend> MycclGlooBackend::createSubgroup(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, Millis timeout) {
  // merge() builds a gloo backend over any store, rank and size, sharing
  // this one's transport device (as gloo's own split() does); it is the one
  // way to make a gloo backend from C++ without gloo's headers.
  auto gloo = gloo_->merge(store, gloo_->getBackendOptions(), rank, size);
  return c10::make_intrusive<MycclGlooBackend>(std::move(gloo), timeout);
}

c10::intrusive_ptr<c10d::Work> MycclGlooBackend::launchGloo(
    c10d::OpType type, const char* name, c10::Device device,
    const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs,
    std::function<void(c10d::Backend&, Millis)> body) {
  return launch(type, name, device, inputs, outputs,
                [gloo = gloo_, body = std::move(body), name, rank = rank_,
                 timeout = timeout()] {
                  try {
                    body(*gloo, timeout);
                  } catch (const std::exception& error) {
                    throwTransportError(name, rank, timeout, error);
                  }
                });
}

c10::intrusive_ptr<c10d::Work> MycclGlooBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                           const c10d::BroadcastOptions& opts) {
  TORCH_CHECK(tensors.size() == 1, "myccl: broadcast takes one tensor per process");
  const at::Tensor& tensor = tensors[0];
  checkTensor(tensor, "broadcast");
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < size_, "myccl: broadcast root ",
              opts.rootRank, " is not a rank of this group");
  const at::Tensor view = hostView(tensor);
  const int64_t root = opts.rootRank;
  return launchGloo(c10d::OpType::BROADCAST, "broadcast", tensor.device(), tensors, tensors,
                    [view, root](c10d::Backend& gloo, Millis timeout) {
                      std::vector<at::Tensor> moved{bytesOf(view)};
                      c10d::BroadcastOptions o;
                      o.rootRank = root;
                      o.timeout = timeout;
                      gloo.broadcast(moved, o)->wait();
                    });
}

c10::intrusive_ptr<c10d::Work> MycclGlooBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                           const c10d::AllreduceOptions& opts) {
  TORCH_CHECK(tensors.size() == 1, "myccl: allreduce takes one tensor per process");
  const at::Tensor& tensor = tensors[0];
  checkTensor(tensor, "allreduce");
  checkReduceOp(opts.reduceOp, tensor.scalar_type(), "allreduce");
  const at::Tensor view = hostView(tensor).view(-1);
  const auto op = opts.reduceOp.op_;
  return launchGloo(
      c10d::OpType::ALLREDUCE, "allreduce", tensor.device(), tensors, tensors,
      [view, op](c10d::Backend& gloo, Millis timeout) {
        const int size = gloo.getSize();
        const int64_t numel = view.numel();
        if (numel == 0) {
          return;
        }
        // Reduce-scatter, then all-gather: each rank sends and receives about
        // twice the tensor, as in a ring all-reduce.
        const std::vector<int64_t> counts = segmentCounts(numel, size);
        const int64_t segment = counts[0];
        // Padded to a full segment: gloo all-gathers equal sizes only.
        at::Tensor reduced = at::empty({segment}, view.options());
        reduceScatterInto(gloo, view, counts, reduced.narrow(0, 0, counts[gloo.getRank()]),
                          op, timeout);
        const bool in_place = numel == segment * size;
        at::Tensor gathered = in_place ? view : at::empty({segment * size}, view.options());
        at::Tensor gathered_bytes = bytesOf(gathered);
        at::Tensor reduced_bytes = bytesOf(reduced);
        c10d::AllgatherOptions o;
        o.timeout = timeout;
        gloo._allgather_base(gathered_bytes, reduced_bytes, o)->wait();
        if (!in_place) {
          view.copy_(gathered.narrow(0, 0, numel));
        }
      });
}

c10::intrusive_ptr<c10d::Work> MycclGlooBackend::reduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::ReduceOptions& opts) {
  TORCH_CHECK(tensors.size() == 1, "myccl: reduce takes one tensor per process");
  const at::Tensor& tensor = tensors[0];
  checkTensor(tensor, "reduce");
  checkReduceOp(opts.reduceOp, tensor.scalar_type(), "reduce");
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < size_, "myccl: reduce root ",
              opts.rootRank, " is not a rank of this group");
  const at::Tensor view = hostView(tensor).view(-1);
  const auto op = opts.reduceOp.op_;
  const int64_t root = opts.rootRank;
  return launchGloo(
      c10d::OpType::REDUCE, "reduce", tensor.device(), tensors, tensors,
      [view, op, root](c10d::Backend& gloo, Millis timeout) {
        const int size = gloo.getSize();
        const int64_t numel = view.numel();
        if (numel == 0) {
          return;
        }
        const std::vector<int64_t> counts = segmentCounts(numel, size);
        const int64_t segment = counts[0];
        at::Tensor reduced = at::empty({segment}, view.options());
        reduceScatterInto(gloo, view, counts, reduced.narrow(0, 0, counts[gloo.getRank()]),
                          op, timeout);
        const bool is_root = gloo.getRank() == root;
        const bool in_place = numel == segment * size;
        at::Tensor gathered;
        std::vector<std::vector<at::Tensor>> outputs;
        if (is_root) {
          gathered = in_place ? view : at::empty({segment * size}, view.options());
          outputs.push_back(bytesOf(at::split(gathered, segment)));
        }
        std::vector<at::Tensor> inputs{bytesOf(reduced)};
        c10d::GatherOptions o;
        o.rootRank = root;
        o.timeout = timeout;
        gloo.gather(outputs, inputs, o)->wait();
        if (is_root && !in_place) {
          view.copy_(gathered.narrow(0, 0, numel));
        }
      });
}

c10::intrusive_ptr<c10d::Work> MycclGlooBackend::allgather(
    std::vector<std::vector<at::Tensor>>& output_tensors,
    std::vector<at::Tensor>& input_tensors, const c10d::AllgatherOptions& /*opts*/) {
  TORCH_CHECK(input_tensors.size() == 1 && output_tensors.size() == 1,
              "myccl: allgather takes one input and one output list per process");
  const at::Tensor& input = input_tensors[0];
  checkTensor(input, "allgather");
  auto& outputs = output_tensors[0];
  TORCH_CHECK(static_cast<int>(outputs.size()) == size_, "myccl: allgather needs ",
              size_, " output tensors, got ", outputs.size());
  const std::vector<at::Tensor> views = perRankViews(outputs, input, "allgather", "output");
  const at::Tensor in = hostView(input);
  return launchGloo(c10d::OpType::ALLGATHER, "allgather", input.device(), input_tensors,
                    outputs, [views, in](c10d::Backend& gloo, Millis timeout) {
                      std::vector<std::vector<at::Tensor>> received{bytesOf(views)};
                      std::vector<at::Tensor> sent{bytesOf(in)};
                      c10d::AllgatherOptions o;
                      o.timeout = timeout;
                      gloo.allgather(received, sent, o)->wait();
                    });
}

c10::intrusive_ptr<c10d::Work> MycclGlooBackend::_allgather_base(
    at::Tensor& output_buffer, at::Tensor& input_buffer,
    const c10d::AllgatherOptions& /*opts*/) {
  checkTensor(input_buffer, "_allgather_base");
  checkTensor(output_buffer, "_allgather_base");
  TORCH_CHECK(output_buffer.numel() == input_buffer.numel() * size_ &&
                  output_buffer.scalar_type() == input_buffer.scalar_type(),
              "myccl: _allgather_base output must hold world_size * input.numel() "
              "elements of the input's dtype");
  TORCH_CHECK(output_buffer.device() == input_buffer.device(),
              "myccl: _allgather_base tensors on two devices");
  const at::Tensor out = hostView(output_buffer);
  const at::Tensor in = hostView(input_buffer);
  return launchGloo(c10d::OpType::_ALLGATHER_BASE, "_allgather_base", input_buffer.device(),
                    {input_buffer}, {output_buffer},
                    [out, in](c10d::Backend& gloo, Millis timeout) {
                      at::Tensor received = bytesOf(out);
                      at::Tensor sent = bytesOf(in);
                      c10d::AllgatherOptions o;
                      o.timeout = timeout;
                      gloo._allgather_base(received, sent, o)->wait();
                    });
}

c10::intrusive_ptr<c10d::Work> MycclGlooBackend::reduce_scatter(
    std::vector<at::Tensor>& output_tensors,
    std::vector<std::vector<at::Tensor>>& input_tensors,
    const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(output_tensors.size() == 1 && input_tensors.size() == 1,
              "myccl: reduce_scatter takes one output and one input list per process");
  auto& inputs = input_tensors[0];
  const at::Tensor& output = output_tensors[0];
  checkTensor(output, "reduce_scatter");
  checkReduceOp(opts.reduceOp, output.scalar_type(), "reduce_scatter");
  TORCH_CHECK(static_cast<int>(inputs.size()) == size_, "myccl: reduce_scatter needs ",
              size_, " input tensors, got ", inputs.size());
  const std::vector<at::Tensor> views = perRankViews(inputs, output, "reduce_scatter", "input");
  const at::Tensor out = hostView(output).view(-1);
  const auto op = opts.reduceOp.op_;
  return launchGloo(
      c10d::OpType::REDUCE_SCATTER, "reduce_scatter", output.device(), inputs, output_tensors,
      [views, out, op](c10d::Backend& gloo, Millis timeout) {
        // The list form of all-to-all takes the per-rank inputs as they are.
        at::Tensor received =
            at::empty({static_cast<int64_t>(views.size()), out.numel()}, out.options());
        std::vector<at::Tensor> parts = received.unbind(0);
        std::vector<at::Tensor> received_bytes = bytesOf(parts);
        std::vector<at::Tensor> sent = bytesOf(views);
        c10d::AllToAllOptions o;
        o.timeout = timeout;
        gloo.alltoall(received_bytes, sent, o)->wait();
        reduceInto(out, parts, op);
      });
}

c10::intrusive_ptr<c10d::Work> MycclGlooBackend::_reduce_scatter_base(
    at::Tensor& output_tensor, at::Tensor& input_tensor,
    const c10d::ReduceScatterOptions& opts) {
  checkTensor(input_tensor, "_reduce_scatter_base");
  checkTensor(output_tensor, "_reduce_scatter_base");
  checkReduceOp(opts.reduceOp, input_tensor.scalar_type(), "_reduce_scatter_base");
  TORCH_CHECK(input_tensor.numel() == output_tensor.numel() * size_ &&
                  output_tensor.scalar_type() == input_tensor.scalar_type(),
              "myccl: _reduce_scatter_base input must hold world_size * output.numel() "
              "elements of the output's dtype");
  TORCH_CHECK(output_tensor.device() == input_tensor.device(),
              "myccl: _reduce_scatter_base tensors on two devices");
  const at::Tensor in = hostView(input_tensor).view(-1);
  const at::Tensor out = hostView(output_tensor).view(-1);
  const auto op = opts.reduceOp.op_;
  return launchGloo(c10d::OpType::_REDUCE_SCATTER_BASE, "_reduce_scatter_base",
                    input_tensor.device(), {input_tensor}, {output_tensor},
                    [in, out, op](c10d::Backend& gloo, Millis timeout) {
                      const std::vector<int64_t> counts(gloo.getSize(), out.numel());
                      reduceScatterInto(gloo, in, counts, out, op, timeout);
                    });
}

c10::intrusive_ptr<c10d::Work> MycclGlooBackend::gather(
    std::vector<std::vector<at::Tensor>>& output_tensors,
    std::vector<at::Tensor>& input_tensors, const c10d::GatherOptions& opts) {
  TORCH_CHECK(input_tensors.size() == 1, "myccl: gather takes one input tensor per process");
  const at::Tensor& input = input_tensors[0];
  checkTensor(input, "gather");
  const int root = static_cast<int>(opts.rootRank);
  TORCH_CHECK(root >= 0 && root < size_, "myccl: gather root ", root,
              " is not a rank of this group");
  std::vector<at::Tensor> outputs;
  std::vector<at::Tensor> views;
  if (rank_ == root) {
    TORCH_CHECK(output_tensors.size() == 1 &&
                    static_cast<int>(output_tensors[0].size()) == size_,
                "myccl: gather needs ", size_, " output tensors on the root");
    outputs = output_tensors[0];
    views = perRankViews(outputs, input, "gather", "output");
  } else {
    TORCH_CHECK(output_tensors.empty() || output_tensors[0].empty(),
                "myccl: gather takes output tensors only on the root");
  }
  const at::Tensor in = hostView(input);
  return launchGloo(c10d::OpType::GATHER, "gather", input.device(), input_tensors, outputs,
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

c10::intrusive_ptr<c10d::Work> MycclGlooBackend::scatter(
    std::vector<at::Tensor>& output_tensors,
    std::vector<std::vector<at::Tensor>>& input_tensors, const c10d::ScatterOptions& opts) {
  TORCH_CHECK(output_tensors.size() == 1, "myccl: scatter takes one output tensor per process");
  const at::Tensor& output = output_tensors[0];
  checkTensor(output, "scatter");
  const int root = static_cast<int>(opts.rootRank);
  TORCH_CHECK(root >= 0 && root < size_, "myccl: scatter root ", root,
              " is not a rank of this group");
  std::vector<at::Tensor> inputs;
  std::vector<at::Tensor> views;
  if (rank_ == root) {
    TORCH_CHECK(input_tensors.size() == 1 && static_cast<int>(input_tensors[0].size()) == size_,
                "myccl: scatter needs ", size_, " input tensors on the root");
    inputs = input_tensors[0];
    views = perRankViews(inputs, output, "scatter", "input");
  } else {
    TORCH_CHECK(input_tensors.empty() || input_tensors[0].empty(),
                "myccl: scatter takes input tensors only on the root");
  }
  const at::Tensor out = hostView(output);
  return launchGloo(c10d::OpType::SCATTER, "scatter", output.device(), inputs, output_tensors,
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

// all_to_all_single's split sizes (rows of dim 0; none: equal splits) as
// byte counts of the flat tensor.
std::vector<int64_t> splitBytes(const at::Tensor& tensor, const std::vector<int64_t>& splits,
                                int size, const char* role) {
  TORCH_CHECK(tensor.dim() >= 1, "myccl: all_to_all ", role, " needs at least one dimension");
  const int64_t rows = tensor.size(0);
  std::vector<int64_t> bytes;
  if (splits.empty()) {
    TORCH_CHECK(rows % size == 0, "myccl: all_to_all ", role, " of ", rows,
                " rows cannot be split equally between ", size,
                " ranks; pass split sizes");
    bytes.assign(size, rows / size);
  } else {
    TORCH_CHECK(static_cast<int>(splits.size()) == size, "myccl: all_to_all needs ", size,
                " ", role, " split sizes, got ", splits.size());
    int64_t total = 0;
    for (const int64_t split : splits) {
      TORCH_CHECK(split >= 0, "myccl: all_to_all ", role, " split sizes must not be negative");
      total += split;
    }
    TORCH_CHECK(total == rows, "myccl: all_to_all ", role, " split sizes add up to ", total,
                " rows, the ", role, " has ", rows);
    bytes = splits;
  }
  const int64_t row_bytes = rows == 0 ? 0 : tensor.numel() / rows * tensor.element_size();
  for (int64_t& b : bytes) {
    b *= row_bytes;
  }
  return bytes;
}

bool equalSizes(const std::vector<at::Tensor>& bytes) {
  return std::all_of(bytes.begin(), bytes.end(),
                     [&](const at::Tensor& b) { return b.numel() == bytes[0].numel(); });
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

c10::intrusive_ptr<c10d::Work> MycclGlooBackend::alltoall_base(
    at::Tensor& output_buffer, at::Tensor& input_buffer,
    std::vector<int64_t>& output_split_sizes, std::vector<int64_t>& input_split_sizes,
    const c10d::AllToAllOptions& /*opts*/) {
  checkTensor(input_buffer, "all_to_all");
  checkTensor(output_buffer, "all_to_all");
  TORCH_CHECK(input_buffer.scalar_type() == output_buffer.scalar_type() &&
                  input_buffer.device() == output_buffer.device(),
              "myccl: all_to_all needs input and output of the same dtype and device");
  std::vector<int64_t> receive_splits =
      splitBytes(output_buffer, output_split_sizes, size_, "output");
  std::vector<int64_t> send_splits = splitBytes(input_buffer, input_split_sizes, size_, "input");
  const at::Tensor in = hostView(input_buffer);
  const at::Tensor out = hostView(output_buffer);
  return launchGloo(c10d::OpType::ALLTOALL_BASE, "all_to_all", input_buffer.device(),
                    {input_buffer}, {output_buffer},
                    [in, out, receive_splits, send_splits](c10d::Backend& gloo,
                                                           Millis timeout) mutable {
                      at::Tensor received = bytesOf(out);
                      at::Tensor sent = bytesOf(in);
                      c10d::AllToAllOptions o;
                      o.timeout = timeout;
                      gloo.alltoall_base(received, sent, receive_splits, send_splits, o)
                          ->wait();
                    });
}

c10::intrusive_ptr<c10d::Work> MycclGlooBackend::alltoall(
    std::vector<at::Tensor>& output_tensors, std::vector<at::Tensor>& input_tensors,
    const c10d::AllToAllOptions& /*opts*/) {
  TORCH_CHECK(static_cast<int>(output_tensors.size()) == size_ &&
                  static_cast<int>(input_tensors.size()) == size_,
              "myccl: all_to_all needs ", size_, " input and ", size_,
              " output tensors, got ", input_tensors.size(), " and ", output_tensors.size());
  std::vector<at::Tensor> outs;
  std::vector<at::Tensor> ins;
  for (const auto* list : {&output_tensors, &input_tensors}) {
    for (const at::Tensor& t : *list) {
      checkTensor(t, "all_to_all");
      TORCH_CHECK(t.scalar_type() == input_tensors[0].scalar_type() &&
                      t.device() == input_tensors[0].device(),
                  "myccl: all_to_all tensors must share one dtype and device");
      (list == &output_tensors ? outs : ins).push_back(hostView(t));
    }
  }
  return launchGloo(c10d::OpType::ALLTOALL, "all_to_all", input_tensors[0].device(),
                    input_tensors, output_tensors,
                    [outs, ins](c10d::Backend& gloo, Millis timeout) {
                      std::vector<at::Tensor> received = bytesOf(outs);
                      std::vector<at::Tensor> sent = bytesOf(ins);
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

c10::intrusive_ptr<c10d::Work> MycclGlooBackend::pointToPoint(
    c10d::OpType type, const char* name, std::vector<at::Tensor>& tensors, int peer, int tag) {
  TORCH_CHECK(tensors.size() == 1, "myccl: ", name, " takes one tensor");
  const at::Tensor& tensor = tensors[0];
  checkTensor(tensor, name);
  TORCH_CHECK(peer >= 0 && peer < size_ && peer != rank_, "myccl: ", name, " peer ", peer,
              " is not another rank of this group");
  const at::Tensor view = hostView(tensor);
  const bool sending = type == c10d::OpType::SEND;
  std::shared_ptr<std::vector<c10::intrusive_ptr<c10d::Work>>> batch = batch_;
  if (batch) {
    ++batch_launched_;
  }
  return launchGloo(type, name, tensor.device(), sending ? tensors : std::vector<at::Tensor>{},
                    sending ? std::vector<at::Tensor>{} : tensors,
                    [view, sending, peer, tag, batch](c10d::Backend& gloo, Millis timeout) {
                      std::vector<at::Tensor> moved{bytesOf(view)};
                      auto work = sending ? gloo.send(moved, peer, tag)
                                          : gloo.recv(moved, peer, tag);
                      if (batch) {
                        batch->push_back(std::move(work));  // endCoalescing waits
                      } else {
                        work->wait(timeout);
                      }
                    });
}

c10::intrusive_ptr<c10d::Work> MycclGlooBackend::send(std::vector<at::Tensor>& tensors,
                                                      int dst_rank, int tag) {
  return pointToPoint(c10d::OpType::SEND, "send", tensors, dst_rank, tag);
}

c10::intrusive_ptr<c10d::Work> MycclGlooBackend::recv(std::vector<at::Tensor>& tensors,
                                                      int src_rank, int tag) {
  return pointToPoint(c10d::OpType::RECV, "recv", tensors, src_rank, tag);
}

void MycclGlooBackend::startCoalescing() {
  CommStreamBackend::startCoalescing();
  batch_ = std::make_shared<std::vector<c10::intrusive_ptr<c10d::Work>>>();
  batch_launched_ = 0;
}

c10::intrusive_ptr<c10d::Work> MycclGlooBackend::endCoalescing() {
  const auto batch = std::exchange(batch_, nullptr);
  if (batch && batch_launched_ > 0) {
    // Launched while still coalescing, so the batch's Work ends with it.
    launchGloo(c10d::OpType::COALESCED, "batch_isend_irecv", defaultDevice(std::nullopt), {},
               {}, [batch](c10d::Backend& /*gloo*/, Millis timeout) {
                 for (const auto& work : *batch) {
                   work->wait(timeout);
                 }
               });
  }
  return CommStreamBackend::endCoalescing();
}

c10::intrusive_ptr<c10d::Work> MycclGlooBackend::barrier(const c10d::BarrierOptions& opts) {
  return launchGloo(c10d::OpType::BARRIER, "barrier", defaultDevice(opts.device), {}, {},
                    [](c10d::Backend& gloo, Millis timeout) {
                      c10d::BarrierOptions o;
                      o.timeout = timeout;
                      gloo.barrier(o)->wait();
                    });
}

}  // namespace mydev::distributed
