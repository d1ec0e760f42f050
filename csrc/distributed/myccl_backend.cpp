#include "myccl_backend.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cstring>

#include "../aten/host_view.h"
#include "collective_checks.h"
#include "reduction.h"

namespace mydev::distributed {

namespace {

constexpr size_t kSlotBytes = ShmTransport::kSlotBytes;

char* bytesOf(const at::Tensor& host_view) {
  return static_cast<char*>(host_view.data_ptr());
}

uint64_t chunksOf(int64_t numel, int64_t per_chunk) {
  return numel == 0 ? 0 : static_cast<uint64_t>((numel + per_chunk - 1) / per_chunk);
}

}  // namespace

// ---------------------------------------------------------------- MycclBackend

MycclBackend::MycclBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                           int size, std::chrono::milliseconds timeout)
    : CommStreamBackend(rank, size, timeout),
      transport_(std::make_unique<ShmTransport>(store, rank, size, timeout)) {}

MycclBackend::~MycclBackend() { drain(); }

c10::intrusive_ptr<c10d::Backend> MycclBackend::createSubgroup(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout) {
  return c10::make_intrusive<MycclBackend>(store, rank, size, timeout);
}

void MycclBackend::abortPeers() { transport_->abort(); }

void MycclBackend::onTimeoutChanged(std::chrono::milliseconds timeout) {
  transport_->setTimeout(timeout);
}

c10::intrusive_ptr<c10d::Work> MycclBackend::launchSteps(
    c10d::OpType type, const char* name, c10::Device device,
    const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs,
    uint64_t steps, std::function<void(uint64_t)> body) {
  // Every rank numbers its steps alike, so nothing that can fail on one rank
  // only may come between reserving them and launching.
  checkLaunchable(name, device);
  const uint64_t first = next_step_;
  next_step_ += steps;
  return launch(type, name, device, inputs, outputs,
                [body = std::move(body), first] { body(first); });
}

c10::intrusive_ptr<c10d::Work> MycclBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                       const c10d::AllreduceOptions& opts) {
  TORCH_CHECK(tensors.size() == 1, "myccl: allreduce takes one tensor per process");
  const at::Tensor& tensor = tensors[0];
  checkTensor(tensor, "allreduce");
  checkReduceOp(opts.reduceOp, tensor.scalar_type(), "allreduce");
  const at::Tensor view = hostView(tensor).view(-1);
  const int64_t elem = tensor.element_size();
  const int64_t per = static_cast<int64_t>(kSlotBytes) / elem;
  const int64_t numel = tensor.numel();
  const uint64_t steps = chunksOf(numel, per);
  ShmTransport* transport = transport_.get();
  const auto op = opts.reduceOp.op_;
  return launchSteps(c10d::OpType::ALLREDUCE, "allreduce", tensor.device(), tensors, tensors,
                steps, [=](uint64_t first) {
                  const int size = transport->size();
                  for (uint64_t c = 0; c < steps; ++c) {
                    const int64_t off = static_cast<int64_t>(c) * per;
                    const int64_t len = std::min(per, numel - off);
                    transport->step(
                        first + c, "allreduce",
                        [&] {
                          std::memcpy(transport->slot(transport->rank()),
                                      bytesOf(view) + off * elem, len * elem);
                        },
                        [&] {
                          std::vector<at::Tensor> parts;
                          for (int r = 0; r < size; ++r) {
                            parts.push_back(at::from_blob(transport->slot(r), {len},
                                                          view.options()));
                          }
                          reduceInto(view.narrow(0, off, len), parts, op);
                        });
                  }
                });
}

c10::intrusive_ptr<c10d::Work> MycclBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                       const c10d::BroadcastOptions& opts) {
  TORCH_CHECK(tensors.size() == 1, "myccl: broadcast takes one tensor per process");
  const at::Tensor& tensor = tensors[0];
  checkTensor(tensor, "broadcast");
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < size_, "myccl: broadcast root ",
              opts.rootRank, " is not a rank of this group");
  const at::Tensor view = hostView(tensor).view(-1);
  const int64_t elem = tensor.element_size();
  const int64_t per = static_cast<int64_t>(kSlotBytes) / elem;
  const int64_t numel = tensor.numel();
  const uint64_t steps = chunksOf(numel, per);
  ShmTransport* transport = transport_.get();
  const int root = static_cast<int>(opts.rootRank);
  return launchSteps(c10d::OpType::BROADCAST, "broadcast", tensor.device(), tensors, tensors,
                steps, [=](uint64_t first) {
                  const bool is_root = transport->rank() == root;
                  for (uint64_t c = 0; c < steps; ++c) {
                    const int64_t off = static_cast<int64_t>(c) * per;
                    const int64_t len = std::min(per, numel - off);
                    char* data = bytesOf(view) + off * elem;
                    transport->step(
                        first + c, "broadcast",
                        [&] {
                          if (is_root) {
                            std::memcpy(transport->slot(root), data, len * elem);
                          }
                        },
                        [&] {
                          if (!is_root) {
                            std::memcpy(data, transport->slot(root), len * elem);
                          }
                        });
                  }
                });
}

namespace {

// Every rank's `input` lands in `outputs[r]` (host views, flat).
std::function<void(uint64_t)> allgatherBody(ShmTransport* transport, at::Tensor input,
                                            std::vector<at::Tensor> outputs,
                                            const char* name, uint64_t steps) {
  const int64_t elem = input.element_size();
  const int64_t per = static_cast<int64_t>(kSlotBytes) / elem;
  const int64_t numel = input.numel();
  return [=](uint64_t first) {
    for (uint64_t c = 0; c < steps; ++c) {
      const int64_t off = static_cast<int64_t>(c) * per;
      const int64_t len = std::min(per, numel - off);
      transport->step(
          first + c, name,
          [&] {
            std::memcpy(transport->slot(transport->rank()), bytesOf(input) + off * elem,
                        len * elem);
          },
          [&] {
            for (int r = 0; r < transport->size(); ++r) {
              std::memcpy(bytesOf(outputs[r]) + off * elem, transport->slot(r), len * elem);
            }
          });
    }
  };
}

}  // namespace

c10::intrusive_ptr<c10d::Work> MycclBackend::allgather(
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
  const int64_t per = static_cast<int64_t>(kSlotBytes) / input.element_size();
  const uint64_t steps = chunksOf(input.numel(), per);
  return launchSteps(c10d::OpType::ALLGATHER, "allgather", input.device(), input_tensors,
                outputs, steps,
                allgatherBody(transport_.get(), hostView(input).view(-1), views,
                              "allgather", steps));
}

c10::intrusive_ptr<c10d::Work> MycclBackend::_allgather_base(
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
  const at::Tensor flat = hostView(output_buffer).view(-1);
  std::vector<at::Tensor> views;
  for (int r = 0; r < size_; ++r) {
    views.push_back(flat.narrow(0, r * input_buffer.numel(), input_buffer.numel()));
  }
  const int64_t per = static_cast<int64_t>(kSlotBytes) / input_buffer.element_size();
  const uint64_t steps = chunksOf(input_buffer.numel(), per);
  return launchSteps(c10d::OpType::_ALLGATHER_BASE, "_allgather_base", input_buffer.device(),
                {input_buffer}, {output_buffer}, steps,
                allgatherBody(transport_.get(), hostView(input_buffer).view(-1), views,
                              "_allgather_base", steps));
}

c10::intrusive_ptr<c10d::Work> MycclBackend::reduce_scatter(
    std::vector<at::Tensor>& output_tensors,
    std::vector<std::vector<at::Tensor>>& input_tensors,
    const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(output_tensors.size() == 1 && input_tensors.size() == 1,
              "myccl: reduce_scatter takes one output and one input list per process");
  auto& inputs = input_tensors[0];
  at::Tensor& output = output_tensors[0];
  checkTensor(output, "reduce_scatter");
  TORCH_CHECK(static_cast<int>(inputs.size()) == size_, "myccl: reduce_scatter needs ",
              size_, " input tensors, got ", inputs.size());
  perRankViews(inputs, output, "reduce_scatter", "input");
  std::vector<at::Tensor> flat_inputs;
  for (const at::Tensor& in : inputs) {
    flat_inputs.push_back(in.view(-1));
  }
  // One copy on the caller's stream (ordered before the collective by the
  // event launch() records), then the single-tensor path; recordStream in
  // launch() keeps the staging buffer until the collective is done.
  at::Tensor staged = at::cat(flat_inputs);
  at::Tensor out = output;
  return _reduce_scatter_base(out, staged, opts);
}

c10::intrusive_ptr<c10d::Work> MycclBackend::_reduce_scatter_base(
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
  const int64_t elem = input_tensor.element_size();
  const int size = size_;
  // Each slot holds one chunk for every destination rank.
  const int64_t per = static_cast<int64_t>(kSlotBytes) / elem / size;
  const int64_t numel = output_tensor.numel();
  const uint64_t steps = chunksOf(numel, per);
  ShmTransport* transport = transport_.get();
  const auto op = opts.reduceOp.op_;
  return launchSteps(
      c10d::OpType::_REDUCE_SCATTER_BASE, "_reduce_scatter_base", input_tensor.device(),
      {input_tensor}, {output_tensor}, steps, [=](uint64_t first) {
        const int rank = transport->rank();
        for (uint64_t c = 0; c < steps; ++c) {
          const int64_t off = static_cast<int64_t>(c) * per;
          const int64_t len = std::min(per, numel - off);
          transport->step(
              first + c, "_reduce_scatter_base",
              [&] {
                char* slot = static_cast<char*>(transport->slot(rank));
                for (int d = 0; d < size; ++d) {
                  std::memcpy(slot + d * per * elem, bytesOf(in) + (d * numel + off) * elem,
                              len * elem);
                }
              },
              [&] {
                std::vector<at::Tensor> parts;
                for (int r = 0; r < size; ++r) {
                  parts.push_back(at::from_blob(
                      static_cast<char*>(transport->slot(r)) + rank * per * elem, {len},
                      out.options()));
                }
                reduceInto(out.narrow(0, off, len), parts, op);
              });
        }
      });
}

c10::intrusive_ptr<c10d::Work> MycclBackend::reduce(std::vector<at::Tensor>& tensors,
                                                    const c10d::ReduceOptions& opts) {
  TORCH_CHECK(tensors.size() == 1, "myccl: reduce takes one tensor per process");
  const at::Tensor& tensor = tensors[0];
  checkTensor(tensor, "reduce");
  checkReduceOp(opts.reduceOp, tensor.scalar_type(), "reduce");
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < size_, "myccl: reduce root ",
              opts.rootRank, " is not a rank of this group");
  const at::Tensor view = hostView(tensor).view(-1);
  const int64_t elem = tensor.element_size();
  const int64_t per = static_cast<int64_t>(kSlotBytes) / elem;
  const int64_t numel = tensor.numel();
  const uint64_t steps = chunksOf(numel, per);
  ShmTransport* transport = transport_.get();
  const auto op = opts.reduceOp.op_;
  const int root = static_cast<int>(opts.rootRank);
  return launchSteps(c10d::OpType::REDUCE, "reduce", tensor.device(), tensors, tensors, steps,
                [=](uint64_t first) {
                  const int size = transport->size();
                  for (uint64_t c = 0; c < steps; ++c) {
                    const int64_t off = static_cast<int64_t>(c) * per;
                    const int64_t len = std::min(per, numel - off);
                    transport->step(
                        first + c, "reduce",
                        [&] {
                          std::memcpy(transport->slot(transport->rank()),
                                      bytesOf(view) + off * elem, len * elem);
                        },
                        [&] {
                          if (transport->rank() != root) {
                            return;
                          }
                          std::vector<at::Tensor> parts;
                          for (int r = 0; r < size; ++r) {
                            parts.push_back(at::from_blob(transport->slot(r), {len},
                                                          view.options()));
                          }
                          reduceInto(view.narrow(0, off, len), parts, op);
                        });
                  }
                });
}

c10::intrusive_ptr<c10d::Work> MycclBackend::gather(
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
  const at::Tensor in = hostView(input).view(-1);
  const int64_t elem = input.element_size();
  const int64_t per = static_cast<int64_t>(kSlotBytes) / elem;
  const int64_t numel = input.numel();
  const uint64_t steps = chunksOf(numel, per);
  ShmTransport* transport = transport_.get();
  return launchSteps(c10d::OpType::GATHER, "gather", input.device(), input_tensors, outputs, steps,
                [=](uint64_t first) {
                  for (uint64_t c = 0; c < steps; ++c) {
                    const int64_t off = static_cast<int64_t>(c) * per;
                    const int64_t len = std::min(per, numel - off);
                    transport->step(
                        first + c, "gather",
                        [&] {
                          std::memcpy(transport->slot(transport->rank()),
                                      bytesOf(in) + off * elem, len * elem);
                        },
                        [&] {
                          if (transport->rank() != root) {
                            return;
                          }
                          for (int r = 0; r < transport->size(); ++r) {
                            std::memcpy(bytesOf(views[r]) + off * elem, transport->slot(r),
                                        len * elem);
                          }
                        });
                  }
                });
}

c10::intrusive_ptr<c10d::Work> MycclBackend::scatter(
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
  const at::Tensor out = hostView(output).view(-1);
  const int64_t elem = output.element_size();
  const int size = size_;
  const int64_t per = static_cast<int64_t>(kSlotBytes) / elem / size;
  const int64_t numel = output.numel();
  const uint64_t steps = chunksOf(numel, per);
  ShmTransport* transport = transport_.get();
  return launchSteps(c10d::OpType::SCATTER, "scatter", output.device(), inputs, output_tensors,
                steps, [=](uint64_t first) {
                  const int rank = transport->rank();
                  for (uint64_t c = 0; c < steps; ++c) {
                    const int64_t off = static_cast<int64_t>(c) * per;
                    const int64_t len = std::min(per, numel - off);
                    char* slot = static_cast<char*>(transport->slot(root));
                    transport->step(
                        first + c, "scatter",
                        [&] {
                          if (rank != root) {
                            return;
                          }
                          for (int d = 0; d < size; ++d) {
                            std::memcpy(slot + d * per * elem, bytesOf(views[d]) + off * elem,
                                        len * elem);
                          }
                        },
                        [&] {
                          std::memcpy(bytesOf(out) + off * elem, slot + rank * per * elem,
                                      len * elem);
                        });
                  }
                });
}

c10::intrusive_ptr<c10d::Work> MycclBackend::alltoall_base(
    at::Tensor& output_buffer, at::Tensor& input_buffer,
    std::vector<int64_t>& output_split_sizes, std::vector<int64_t>& input_split_sizes,
    const c10d::AllToAllOptions& /*opts*/) {
  checkTensor(input_buffer, "all_to_all");
  checkTensor(output_buffer, "all_to_all");
  TORCH_CHECK(output_split_sizes.empty() && input_split_sizes.empty(),
              "myccl: all_to_all supports equal splits only (no split sizes) for now");
  TORCH_CHECK(input_buffer.numel() == output_buffer.numel() &&
                  input_buffer.numel() % size_ == 0 &&
                  input_buffer.scalar_type() == output_buffer.scalar_type() &&
                  input_buffer.device() == output_buffer.device(),
              "myccl: all_to_all needs input and output of the same size, divisible by "
              "the world size, dtype and device");
  const at::Tensor in = hostView(input_buffer).view(-1);
  const at::Tensor out = hostView(output_buffer).view(-1);
  const int64_t elem = input_buffer.element_size();
  const int size = size_;
  const int64_t per = static_cast<int64_t>(kSlotBytes) / elem / size;
  const int64_t numel = input_buffer.numel() / size;  // per destination
  const uint64_t steps = chunksOf(numel, per);
  ShmTransport* transport = transport_.get();
  return launchSteps(c10d::OpType::ALLTOALL_BASE, "all_to_all", input_buffer.device(),
                {input_buffer}, {output_buffer}, steps, [=](uint64_t first) {
                  const int rank = transport->rank();
                  for (uint64_t c = 0; c < steps; ++c) {
                    const int64_t off = static_cast<int64_t>(c) * per;
                    const int64_t len = std::min(per, numel - off);
                    transport->step(
                        first + c, "all_to_all",
                        [&] {
                          char* slot = static_cast<char*>(transport->slot(rank));
                          for (int d = 0; d < size; ++d) {
                            std::memcpy(slot + d * per * elem,
                                        bytesOf(in) + (d * numel + off) * elem, len * elem);
                          }
                        },
                        [&] {
                          for (int s = 0; s < size; ++s) {
                            std::memcpy(bytesOf(out) + (s * numel + off) * elem,
                                        static_cast<char*>(transport->slot(s)) +
                                            rank * per * elem,
                                        len * elem);
                          }
                        });
                  }
                });
}

c10::intrusive_ptr<c10d::Work> MycclBackend::barrier(const c10d::BarrierOptions& opts) {
  ShmTransport* transport = transport_.get();
  return launchSteps(c10d::OpType::BARRIER, "barrier", defaultDevice(opts.device), {}, {}, 1,
                [transport](uint64_t first) {
                  transport->step(first, "barrier", nullptr, nullptr);
                });
}

}  // namespace mydev::distributed
