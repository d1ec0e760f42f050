// myccl: the c10d backend for mydev tensors (same host, shared memory).
//
// Stream semantics as NCCL's: a collective records an event on the caller's
// current mydev stream, the backend's communication stream (a pool stream)
// waits on it, the exchange runs as a kernel on the communication stream and
// a completion event is recorded after it. Work::wait() makes the caller's
// current stream wait on that event (and, with MYCCL_BLOCKING_WAIT=1 or an
// explicit timeout, also blocks the host until the collective finished and
// raises its error). The Work's future completes (or fails) when the kernel
// has finished, from a watcher thread.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "../core/mydev_event.h"
#include "../core/mydev_stream.h"
#include "shm_transport.h"

namespace mydev::distributed {

// Completion of one collective, set by its kernel.
struct WorkState {
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  std::exception_ptr error;

  void finish(std::exception_ptr failure);
  // False on timeout.
  bool waitDone(std::chrono::milliseconds timeout);
};

class MycclWork : public c10d::Work {
 public:
  MycclWork(c10d::OpType type, const char* name, c10::Device device,
            std::vector<at::Tensor> outputs, std::shared_ptr<WorkState> state,
            std::shared_ptr<MydevEvent> done_event, bool blocking_wait,
            std::chrono::milliseconds timeout);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  void synchronize() override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void blockCurrentStream() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

  const std::shared_ptr<WorkState>& state() const { return state_; }
  const std::shared_ptr<MydevEvent>& doneEvent() const { return done_event_; }
  c10::Device device() const { return device_; }
  const c10::intrusive_ptr<c10::ivalue::Future>& future() const { return future_; }

 private:
  const char* name_;
  c10::Device device_;
  std::vector<at::Tensor> outputs_;
  std::shared_ptr<WorkState> state_;
  std::shared_ptr<MydevEvent> done_event_;
  bool blocking_wait_;
  std::chrono::milliseconds timeout_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

class MycclBackend : public c10d::Backend {
 public:
  MycclBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
               std::chrono::milliseconds timeout);
  ~MycclBackend() override;

  const std::string getBackendName() const override { return "myccl"; }
  c10::intrusive_ptr<Options> getBackendOptions() override { return options_; }
  void setTimeout(std::chrono::milliseconds timeout) override;
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override { return collectives_; }

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
  // The *_coalesced collectives (functional collectives, FSDP2): one
  // collective per tensor, in order on the communication stream; the Work
  // completes with the last one (an earlier failure fails every later one).
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceCoalescedOptions& opts =
          c10d::AllreduceCoalescedOptions()) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> barrier(
      const c10d::BarrierOptions& opts = c10d::BarrierOptions()) override;

 private:
  struct Pending {
    std::shared_ptr<WorkState> state;
    c10::intrusive_ptr<c10::ivalue::Future> future;
    std::vector<at::Tensor> outputs;
  };
  // Shared with the watcher thread, which is detached at destruction: a
  // future's callback may be Python code that needs the GIL, which the
  // thread destroying the backend may hold, so joining could deadlock.
  struct WatchQueue {
    std::mutex mutex;
    std::condition_variable cv;
    std::deque<Pending> pending;
    bool stopping = false;
  };

  // Binds the backend to `device` (first use) and returns its stream.
  MydevStream commStream(c10::Device device);
  // Events, stream order, recordStream, kernel launch, Work and future.
  // `body(first_step)` runs on the communication stream; it uses exactly
  // `steps` steps.
  c10::intrusive_ptr<c10d::Work> launch(
      c10d::OpType type, const char* name, c10::Device device,
      const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs,
      uint64_t steps, std::function<void(uint64_t)> body);
  c10::intrusive_ptr<c10d::Work> coalesced(
      c10d::OpType type, const char* name,
      const std::vector<c10::intrusive_ptr<c10d::Work>>& works,
      const std::vector<at::Tensor>& outputs);
  static void watch(const std::shared_ptr<WatchQueue>& queue);

  c10::intrusive_ptr<Options> options_;
  std::unique_ptr<ShmTransport> transport_;
  std::chrono::milliseconds timeout_;
  bool blocking_wait_;
  std::optional<c10::Device> device_;
  std::optional<MydevStream> stream_;
  uint64_t next_step_ = 1;
  uint64_t collectives_ = 0;
  // Set (from the executor) once a collective failed: the shared flags are
  // out of step, so later collectives fail at once.
  std::shared_ptr<std::atomic<bool>> broken_;

  std::shared_ptr<WatchQueue> queue_;
};

}  // namespace mydev::distributed
