#include "myccl_backend.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cstdlib>
#include <cstring>

#include "../aten/host_view.h"
#include "../aten/kernel_launch.h"
#include "../core/caching_allocator.h"

namespace mydev::distributed {

namespace {

constexpr size_t kSlotBytes = ShmTransport::kSlotBytes;

[[noreturn]] void throwDist(const std::string& message) {
  C10_THROW_ERROR(DistBackendError, message);
}

void checkTensor(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, "myccl: ", what,
              " takes mydev tensors, got a tensor on ", t.device(),
              " (use \"mydev:myccl,cpu:gloo\" for CPU tensors)");
  TORCH_CHECK(t.layout() == c10::kStrided, "myccl: ", what, " takes dense tensors");
  TORCH_CHECK(t.is_contiguous(), "myccl: ", what, " takes contiguous tensors");
  switch (t.scalar_type()) {
    case at::kFloat:
    case at::kDouble:
    case at::kHalf:
    case at::kBFloat16:
    case at::kByte:
    case at::kChar:
    case at::kShort:
    case at::kInt:
    case at::kLong:
    case at::kBool:
      break;
    default:
      TORCH_CHECK(false, "myccl: ", what, " does not support dtype ", t.scalar_type());
  }
}

// One tensor per rank (`role`: "input" or "output" tensors of `what`), each
// checked to be a mydev tensor with `like`'s size, dtype and device; returns
// their flat host views, which the collective's kernel reads or writes.
std::vector<at::Tensor> perRankViews(const std::vector<at::Tensor>& tensors,
                                     const at::Tensor& like, const char* what,
                                     const char* role) {
  std::vector<at::Tensor> views;
  views.reserve(tensors.size());
  for (const at::Tensor& t : tensors) {
    checkTensor(t, what);
    TORCH_CHECK(t.numel() == like.numel() && t.scalar_type() == like.scalar_type() &&
                    t.device() == like.device(),
                "myccl: ", what, " ", role, " tensors must match the ",
                role == std::string("input") ? "output" : "input",
                "'s size, dtype and device");
    views.push_back(hostView(t).view(-1));
  }
  return views;
}

void checkReduceOp(const c10d::ReduceOp& op, at::ScalarType dtype, const char* what) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
    case c10d::ReduceOp::PRODUCT:
    case c10d::ReduceOp::MIN:
    case c10d::ReduceOp::MAX:
    case c10d::ReduceOp::AVG:
      break;
    default:
      TORCH_CHECK(false, "myccl: ", what, " supports the reduce ops SUM, AVG, PRODUCT, "
                  "MIN and MAX (not bitwise or PREMUL_SUM yet)");
  }
  TORCH_CHECK(dtype != at::kBool, "myccl: ", what, " does not reduce bool tensors");
}

// out = op over parts (rank 0 first, the same order on every rank, so every
// rank gets bit-identical results). float16/bfloat16 accumulate in float32
// and round once; other dtypes reduce in their own dtype. AVG divides the sum
// by the world size (integers: truncating division).
void reduceInto(const at::Tensor& out, const std::vector<at::Tensor>& parts,
                c10d::ReduceOp::RedOpType op) {
  const at::ScalarType dtype = out.scalar_type();
  const bool reduced = dtype == at::kHalf || dtype == at::kBFloat16;
  const at::ScalarType acc_type = reduced ? at::kFloat : dtype;
  at::Tensor acc = parts[0].to(acc_type, /*non_blocking=*/false, /*copy=*/true);
  for (size_t r = 1; r < parts.size(); ++r) {
    const at::Tensor part = reduced ? parts[r].to(at::kFloat) : parts[r];
    switch (op) {
      case c10d::ReduceOp::SUM:
      case c10d::ReduceOp::AVG:
        acc.add_(part);
        break;
      case c10d::ReduceOp::PRODUCT:
        acc.mul_(part);
        break;
      case c10d::ReduceOp::MIN:
        at::minimum_out(acc, acc, part);
        break;
      case c10d::ReduceOp::MAX:
        at::maximum_out(acc, acc, part);
        break;
      default:
        TORCH_INTERNAL_ASSERT(false, "unchecked reduce op");
    }
  }
  if (op == c10d::ReduceOp::AVG) {
    const auto n = static_cast<int64_t>(parts.size());
    if (at::isFloatingType(acc_type)) {
      acc.div_(n);
    } else {
      acc.div_(at::Scalar(n), "trunc");
    }
  }
  out.copy_(acc);
}

char* bytesOf(const at::Tensor& host_view) {
  return static_cast<char*>(host_view.data_ptr());
}

uint64_t chunksOf(int64_t numel, int64_t per_chunk) {
  return numel == 0 ? 0 : static_cast<uint64_t>((numel + per_chunk - 1) / per_chunk);
}

}  // namespace

// ---------------------------------------------------------------- WorkState

void WorkState::finish(std::exception_ptr failure) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    done = true;
    error = std::move(failure);
  }
  done_cv.notify_all();
}

bool WorkState::waitDone(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex);
  if (timeout.count() <= 0) {
    done_cv.wait(lock, [&] { return done; });
    return true;
  }
  return done_cv.wait_for(lock, timeout, [&] { return done; });
}

// ---------------------------------------------------------------- MycclWork

MycclWork::MycclWork(c10d::OpType type, const char* name, c10::Device device,
                     std::vector<at::Tensor> outputs, std::shared_ptr<WorkState> state,
                     std::shared_ptr<MydevEvent> done_event, bool blocking_wait,
                     std::chrono::milliseconds timeout)
    : c10d::Work(-1, type),
      name_(name),
      device_(device),
      outputs_(std::move(outputs)),
      state_(std::move(state)),
      done_event_(std::move(done_event)),
      blocking_wait_(blocking_wait),
      timeout_(timeout),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()),
          std::vector<c10::Device>{device})) {}

bool MycclWork::isCompleted() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->done;
}

bool MycclWork::isSuccess() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->done && !state_->error;
}

std::exception_ptr MycclWork::exception() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->error;
}

std::vector<at::Tensor> MycclWork::result() { return outputs_; }

void MycclWork::blockCurrentStream() {
  done_event_->block(getCurrentStream(device_.index()));
}

void MycclWork::synchronize() { blockCurrentStream(); }

bool MycclWork::wait(std::chrono::milliseconds timeout) {
  blockCurrentStream();
  if (blocking_wait_ || timeout != ::kNoTimeout) {
    // The kernel gives up by itself after the group timeout; the margin
    // covers a loaded machine.
    const auto limit = timeout != ::kNoTimeout
                           ? timeout
                           : timeout_ + std::chrono::milliseconds(30000);
    if (!state_->waitDone(limit)) {
      throwDist(c10::str("myccl: wait() on ", name_, " timed out after ",
                         limit.count(), " ms"));
    }
    // Reports (and so clears) the failure the kernel left on the device,
    // which a later synchronizing call would raise again otherwise.
    done_event_->synchronize();
  }
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    error = state_->error;
  }
  if (error) {
    std::rethrow_exception(error);
  }
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> MycclWork::getFuture() { return future_; }

// ---------------------------------------------------------------- MycclBackend

MycclBackend::MycclBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                           int size, std::chrono::milliseconds timeout)
    : c10d::Backend(rank, size),
      options_(c10::make_intrusive<Options>("myccl", timeout)),
      transport_(std::make_unique<ShmTransport>(store, rank, size, timeout)),
      timeout_(timeout),
      broken_(std::make_shared<std::atomic<bool>>(false)) {
  const char* blocking = std::getenv("MYCCL_BLOCKING_WAIT");
  blocking_wait_ = blocking != nullptr && std::strcmp(blocking, "1") == 0;
  queue_ = std::make_shared<WatchQueue>();
  std::thread([queue = queue_] { watch(queue); }).detach();
}

MycclBackend::~MycclBackend() {
  if (stream_) {
    try {
      // Kernels use the transport: let them finish (each gives up after the
      // timeout at worst).
      stream_->synchronize();
    } catch (...) {
    }
  }
  {
    std::lock_guard<std::mutex> lock(queue_->mutex);
    queue_->stopping = true;
  }
  // The watcher completes what is queued and exits by itself.
  queue_->cv.notify_all();
}

void MycclBackend::setTimeout(std::chrono::milliseconds timeout) {
  timeout_ = timeout;
  options_->timeout = timeout;
  transport_->setTimeout(timeout);
}

void MycclBackend::watch(const std::shared_ptr<WatchQueue>& queue) {
  for (;;) {
    Pending item;
    {
      std::unique_lock<std::mutex> lock(queue->mutex);
      queue->cv.wait(lock, [&] { return queue->stopping || !queue->pending.empty(); });
      if (queue->pending.empty()) {
        return;
      }
      item = std::move(queue->pending.front());
      queue->pending.pop_front();
    }
    item.state->waitDone(std::chrono::milliseconds(0));
    std::exception_ptr error;
    {
      std::lock_guard<std::mutex> lock(item.state->mutex);
      error = item.state->error;
    }
    try {
      if (error) {
        item.future->setError(error);
      } else {
        item.future->markCompleted(c10::IValue(item.outputs));
      }
    } catch (...) {
      // A callback failing must not kill the watcher.
    }
  }
}

MydevStream MycclBackend::commStream(c10::Device device) {
  TORCH_CHECK(device.type() == c10::DeviceType::PrivateUse1,
              "myccl handles mydev tensors only, got ", device);
  if (!device_) {
    device_ = device;
    stream_ = getStreamFromPool(0, device.index());
  }
  TORCH_CHECK(*device_ == device, "myccl: a process group uses one device per process; "
              "this one is bound to ", *device_, ", got a tensor on ", device);
  return *stream_;
}

c10::intrusive_ptr<c10d::Work> MycclBackend::launch(
    c10d::OpType type, const char* name, c10::Device device,
    const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs,
    uint64_t steps, std::function<void(uint64_t)> body) {
  if (broken_->load()) {
    throwDist(c10::str("myccl: ", name, " on rank ", rank_,
                       ": an earlier collective of this process group failed; "
                       "destroy the group and create a new one"));
  }
  const MydevStream stream = commStream(device);
  const MydevStream caller = getCurrentStream(device.index());
  {
    // The wait task keeps the recorded point alive; the event may go now.
    MydevEvent ready;
    ready.record(caller);
    ready.block(stream);
  }
  for (const auto* list : {&inputs, &outputs}) {
    for (const at::Tensor& t : *list) {
      if (t.defined() && t.storage().data_ptr().get() != nullptr) {
        cachingAllocator().recordStream(t.storage().data_ptr(), stream);
      }
    }
  }
  const uint64_t first = next_step_;
  next_step_ += steps;
  ++collectives_;
  auto state = std::make_shared<WorkState>();
  ShmTransport* transport = transport_.get();
  const int rank = rank_;
  launchKernel(name, stream,
               [body = std::move(body), state, broken = broken_, transport, first,
                name, rank] {
                 try {
                   if (broken->load()) {
                     throwDist(c10::str("myccl: ", name, " on rank ", rank,
                                        ": an earlier collective of this process "
                                        "group failed"));
                   }
                   body(first);
                 } catch (...) {
                   broken->store(true);
                   transport->abort();
                   state->finish(std::current_exception());
                   throw;
                 }
                 state->finish(nullptr);
               });
  auto done = std::make_shared<MydevEvent>();
  done->record(stream);
  // barrier() is a host barrier (as NCCL's, whose wait synchronizes).
  const bool blocking = blocking_wait_ || type == c10d::OpType::BARRIER;
  auto work = c10::make_intrusive<MycclWork>(type, name, device, outputs, state, done,
                                             blocking, timeout_);
  {
    std::lock_guard<std::mutex> lock(queue_->mutex);
    queue_->pending.push_back(Pending{state, work->future(), outputs});
  }
  queue_->cv.notify_all();
  return work;
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
  return launch(c10d::OpType::ALLREDUCE, "allreduce", tensor.device(), tensors, tensors,
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
  return launch(c10d::OpType::BROADCAST, "broadcast", tensor.device(), tensors, tensors,
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
  return launch(c10d::OpType::ALLGATHER, "allgather", input.device(), input_tensors,
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
  return launch(c10d::OpType::_ALLGATHER_BASE, "_allgather_base", input_buffer.device(),
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
  return launch(
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
  return launch(c10d::OpType::REDUCE, "reduce", tensor.device(), tensors, tensors, steps,
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
  return launch(c10d::OpType::GATHER, "gather", input.device(), input_tensors, outputs, steps,
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
  return launch(c10d::OpType::SCATTER, "scatter", output.device(), inputs, output_tensors,
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
  return launch(c10d::OpType::ALLTOALL_BASE, "all_to_all", input_buffer.device(),
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

c10::intrusive_ptr<c10d::Work> MycclBackend::coalesced(
    c10d::OpType type, const char* name,
    const std::vector<c10::intrusive_ptr<c10d::Work>>& works,
    const std::vector<at::Tensor>& outputs) {
  if (works.empty()) {
    const c10::Device device = device_.value_or(
        c10::Device(c10::DeviceType::PrivateUse1, currentDevice()));
    return launch(type, name, device, {}, {}, 0, [](uint64_t) {});
  }
  auto last = c10::static_intrusive_pointer_cast<MycclWork>(works.back());
  auto work = c10::make_intrusive<MycclWork>(type, name, last->device(), outputs,
                                             last->state(), last->doneEvent(),
                                             blocking_wait_, timeout_);
  {
    std::lock_guard<std::mutex> lock(queue_->mutex);
    queue_->pending.push_back(Pending{last->state(), work->future(), outputs});
  }
  queue_->cv.notify_all();
  return work;
}

c10::intrusive_ptr<c10d::Work> MycclBackend::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  for (at::Tensor& tensor : tensors) {
    std::vector<at::Tensor> one{tensor};
    works.push_back(allreduce(one, opts));
  }
  return coalesced(c10d::OpType::ALLREDUCE_COALESCED, "allreduce_coalesced", works, tensors);
}

c10::intrusive_ptr<c10d::Work> MycclBackend::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(),
              "myccl: allgather_into_tensor_coalesced needs as many outputs as inputs");
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  for (size_t i = 0; i < inputs.size(); ++i) {
    works.push_back(_allgather_base(outputs[i], inputs[i], opts));
  }
  return coalesced(c10d::OpType::COALESCED, "allgather_into_tensor_coalesced", works, outputs);
}

c10::intrusive_ptr<c10d::Work> MycclBackend::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(),
              "myccl: reduce_scatter_tensor_coalesced needs as many outputs as inputs");
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  for (size_t i = 0; i < inputs.size(); ++i) {
    works.push_back(_reduce_scatter_base(outputs[i], inputs[i], opts));
  }
  return coalesced(c10d::OpType::COALESCED, "reduce_scatter_tensor_coalesced", works,
                   outputs);
}

c10::intrusive_ptr<c10d::Work> MycclBackend::barrier(const c10d::BarrierOptions& opts) {
  c10::Device device = device_.value_or(
      c10::Device(c10::DeviceType::PrivateUse1, currentDevice()));
  if (!device_ && opts.device && opts.device->type() == c10::DeviceType::PrivateUse1) {
    device = *opts.device;
  }
  ShmTransport* transport = transport_.get();
  return launch(c10d::OpType::BARRIER, "barrier", device, {}, {}, 1,
                [transport](uint64_t first) {
                  transport->step(first, "barrier", nullptr, nullptr);
                });
}

}  // namespace mydev::distributed
