// CommStreamBackend's c10d entry points: the part of every collective that
// does not depend on the transport. Each checks its arguments on the calling
// thread (collective_checks.h), takes host views of the tensors (the kernels
// read and write device memory only through them) and launches the
// transport's kernel.
#include <ATen/ATen.h>

#include "../aten/host_view.h"
#include "collective_checks.h"
#include "comm_stream_backend.h"

namespace mydev::distributed {

c10::intrusive_ptr<c10d::Work> CommStreamBackend::run(
    c10d::OpType type, const char* name, c10::Device device,
    const std::vector<at::Tensor>& inputs,
    const std::vector<at::Tensor>& outputs,
    c10::function_ref<Kernel()> make_kernel) {
  // A transport may number its collectives in make_kernel(): every rank
  // numbers them alike, so nothing that can fail on one rank only may come
  // between that and the launch.
  checkLaunchable(name, device);
  return launch(type, name, device, inputs, outputs, make_kernel());
}

c10::intrusive_ptr<c10d::Work> CommStreamBackend::broadcast(
    std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  const at::Tensor& tensor = onlyTensor(tensors, "broadcast");
  const int root = checkRoot(opts.rootRank, size_, "broadcast");
  const at::Tensor view = hostView(tensor).view(-1);
  return run(c10d::OpType::BROADCAST, "broadcast", tensor.device(), tensors,
             tensors, [&] { return broadcastKernel(view, root); });
}

c10::intrusive_ptr<c10d::Work> CommStreamBackend::allreduce(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  const at::Tensor& tensor = onlyTensor(tensors, "allreduce");
  checkReduceOp(opts.reduceOp, tensor.scalar_type(), "allreduce");
  const at::Tensor view = hostView(tensor).view(-1);
  return run(c10d::OpType::ALLREDUCE, "allreduce", tensor.device(), tensors,
             tensors, [&] { return allreduceKernel(view, opts.reduceOp.op_); });
}

c10::intrusive_ptr<c10d::Work> CommStreamBackend::reduce(
    std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  const at::Tensor& tensor = onlyTensor(tensors, "reduce");
  checkReduceOp(opts.reduceOp, tensor.scalar_type(), "reduce");
  const int root = checkRoot(opts.rootRank, size_, "reduce");
  const at::Tensor view = hostView(tensor).view(-1);
  return run(c10d::OpType::REDUCE, "reduce", tensor.device(), tensors, tensors,
             [&] { return reduceKernel(view, opts.reduceOp.op_, root); });
}

c10::intrusive_ptr<c10d::Work> CommStreamBackend::allgather(
    std::vector<std::vector<at::Tensor>>& output_tensors,
    std::vector<at::Tensor>& input_tensors,
    const c10d::AllgatherOptions& /*opts*/) {
  const std::vector<at::Tensor> views = listFormViews(
      input_tensors, output_tensors, size_, "allgather", "output");
  const at::Tensor& input = input_tensors[0];
  const at::Tensor in = hostView(input).view(-1);
  return run(c10d::OpType::ALLGATHER, "allgather", input.device(),
             input_tensors, output_tensors[0],
             [&] { return allgatherKernel("allgather", in, views); });
}

c10::intrusive_ptr<c10d::Work> CommStreamBackend::_allgather_base(
    at::Tensor& output_buffer, at::Tensor& input_buffer,
    const c10d::AllgatherOptions& /*opts*/) {
  checkRankPieces(input_buffer, output_buffer, size_, "_allgather_base",
                  "output");
  const at::Tensor out = hostView(output_buffer).view(-1);
  const at::Tensor in = hostView(input_buffer).view(-1);
  return run(c10d::OpType::_ALLGATHER_BASE, "_allgather_base",
             input_buffer.device(), {input_buffer}, {output_buffer},
             [&] { return allgatherIntoTensorKernel(in, out); });
}

c10::intrusive_ptr<c10d::Work> CommStreamBackend::reduce_scatter(
    std::vector<at::Tensor>& output_tensors,
    std::vector<std::vector<at::Tensor>>& input_tensors,
    const c10d::ReduceScatterOptions& opts) {
  listFormViews(output_tensors, input_tensors, size_, "reduce_scatter",
                "input");
  std::vector<at::Tensor> flat_inputs;
  for (const at::Tensor& in : input_tensors[0]) {
    flat_inputs.push_back(in.view(-1));
  }
  // One copy on the caller's stream (ordered before the collective by the
  // event launch() records), then the single-tensor form; recordStream in
  // launch() keeps the staging buffer until the collective is done.
  at::Tensor staged = at::cat(flat_inputs);
  at::Tensor out = output_tensors[0];
  return _reduce_scatter_base(out, staged, opts);
}

c10::intrusive_ptr<c10d::Work> CommStreamBackend::_reduce_scatter_base(
    at::Tensor& output_tensor, at::Tensor& input_tensor,
    const c10d::ReduceScatterOptions& opts) {
  checkRankPieces(input_tensor, output_tensor, size_, "_reduce_scatter_base",
                  "input");
  checkReduceOp(opts.reduceOp, input_tensor.scalar_type(),
                "_reduce_scatter_base");
  const at::Tensor in = hostView(input_tensor).view(-1);
  const at::Tensor out = hostView(output_tensor).view(-1);
  return run(c10d::OpType::_REDUCE_SCATTER_BASE, "_reduce_scatter_base",
             input_tensor.device(), {input_tensor}, {output_tensor},
             [&] { return reduceScatterKernel(in, out, opts.reduceOp.op_); });
}

c10::intrusive_ptr<c10d::Work> CommStreamBackend::gather(
    std::vector<std::vector<at::Tensor>>& output_tensors,
    std::vector<at::Tensor>& input_tensors, const c10d::GatherOptions& opts) {
  const at::Tensor& input = onlyTensor(input_tensors, "gather", "input");
  const int root = checkRoot(opts.rootRank, size_, "gather");
  const RootedList outputs = rootedList(output_tensors, input, rank_ == root,
                                        size_, "gather", "output");
  const at::Tensor in = hostView(input).view(-1);
  return run(c10d::OpType::GATHER, "gather", input.device(), input_tensors,
             outputs.tensors,
             [&] { return gatherKernel(in, outputs.views, root); });
}

c10::intrusive_ptr<c10d::Work> CommStreamBackend::scatter(
    std::vector<at::Tensor>& output_tensors,
    std::vector<std::vector<at::Tensor>>& input_tensors,
    const c10d::ScatterOptions& opts) {
  const at::Tensor& output = onlyTensor(output_tensors, "scatter", "output");
  const int root = checkRoot(opts.rootRank, size_, "scatter");
  const RootedList inputs = rootedList(input_tensors, output, rank_ == root,
                                       size_, "scatter", "input");
  const at::Tensor out = hostView(output).view(-1);
  return run(c10d::OpType::SCATTER, "scatter", output.device(), inputs.tensors,
             output_tensors,
             [&] { return scatterKernel(inputs.views, out, root); });
}

c10::intrusive_ptr<c10d::Work> CommStreamBackend::alltoall_base(
    at::Tensor& output_buffer, at::Tensor& input_buffer,
    std::vector<int64_t>& output_split_sizes,
    std::vector<int64_t>& input_split_sizes,
    const c10d::AllToAllOptions& /*opts*/) {
  const AlltoallRows rows =
      alltoallRows(input_buffer, output_buffer, input_split_sizes,
                   output_split_sizes, size_);
  const at::Tensor in = hostView(input_buffer);
  const at::Tensor out = hostView(output_buffer);
  return run(c10d::OpType::ALLTOALL_BASE, "all_to_all", input_buffer.device(),
             {input_buffer}, {output_buffer},
             [&] { return alltoallBaseKernel(in, out, rows); });
}

c10::intrusive_ptr<c10d::Work> CommStreamBackend::alltoall(
    std::vector<at::Tensor>& output_tensors,
    std::vector<at::Tensor>& input_tensors,
    const c10d::AllToAllOptions& /*opts*/) {
  const AlltoallViews views =
      alltoallViews(input_tensors, output_tensors, size_);
  return run(c10d::OpType::ALLTOALL, "all_to_all", input_tensors[0].device(),
             input_tensors, output_tensors,
             [&] { return alltoallKernel(views.inputs, views.outputs); });
}

c10::intrusive_ptr<c10d::Work> CommStreamBackend::barrier(
    const c10d::BarrierOptions& opts) {
  return run(c10d::OpType::BARRIER, "barrier", defaultDevice(opts.device), {},
             {}, [&] { return barrierKernel(); });
}

c10::intrusive_ptr<c10d::Work> CommStreamBackend::send(
    std::vector<at::Tensor>& tensors, int dst_rank, int tag) {
  const at::Tensor& tensor =
      pointToPointTensor(tensors, dst_rank, rank_, size_, "send");
  const at::Tensor view = hostView(tensor).view(-1);
  return run(c10d::OpType::SEND, "send", tensor.device(), tensors, {},
             [&] { return pointToPointKernel(true, view, dst_rank, tag); });
}

c10::intrusive_ptr<c10d::Work> CommStreamBackend::recv(
    std::vector<at::Tensor>& tensors, int src_rank, int tag) {
  const at::Tensor& tensor =
      pointToPointTensor(tensors, src_rank, rank_, size_, "recv");
  const at::Tensor view = hostView(tensor).view(-1);
  return run(c10d::OpType::RECV, "recv", tensor.device(), {}, tensors,
             [&] { return pointToPointKernel(false, view, src_rank, tag); });
}

}  // namespace mydev::distributed
