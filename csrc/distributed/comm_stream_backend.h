// What every myccl backend shares, whatever moves the bytes: collectives run
// as kernels on a communication stream, in stream order, like NCCL's.
//
// A collective records an event on the caller's current mydev stream, the
// backend's communication stream (a pool stream) waits on it, the exchange
// runs as a kernel on the communication stream and a completion event is
// recorded after it. Work::wait() makes the caller's current stream wait on
// that event (and, with MYCCL_BLOCKING_WAIT=1 or an explicit timeout, also
// blocks the host until the collective finished and raises its error). The
// Work's future completes (or fails) when the kernel has finished, from a
// watcher thread.
//
// The c10d entry points are implemented here, once
// (collective_entry_points.cpp): each checks its arguments on the calling
// thread, so a bad call fails with a clear message and the group stays usable,
// and hands the collective's host views to the transport, which returns the
// kernel that moves the bytes. Transports: shared memory on one host
// (shm_transport_backend.h) and gloo's TCP transport across hosts
// (gloo_transport_backend.h).
#pragma once

#include <c10/util/FunctionRef.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "../core/mydev_stream.h"
#include "collective_checks.h"
#include "myccl_work.h"

namespace mydev::distributed {

class CommStreamBackend : public c10d::Backend {
 public:
  ~CommStreamBackend() override;

  const std::string getBackendName() const override { return "myccl"; }

  // The collectives and point-to-point operations, checked here and run by
  // the transport's kernels (see Transport kernels below).
  c10::intrusive_ptr<c10d::Work> broadcast(
      std::vector<at::Tensor>& tensors,
      const c10d::BroadcastOptions& opts = c10d::BroadcastOptions()) final;
  c10::intrusive_ptr<c10d::Work> allreduce(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceOptions& opts = c10d::AllreduceOptions()) final;
  c10::intrusive_ptr<c10d::Work> reduce(
      std::vector<at::Tensor>& tensors,
      const c10d::ReduceOptions& opts = c10d::ReduceOptions()) final;
  c10::intrusive_ptr<c10d::Work> allgather(
      std::vector<std::vector<at::Tensor>>& output_tensors,
      std::vector<at::Tensor>& input_tensors,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) final;
  c10::intrusive_ptr<c10d::Work> _allgather_base(
      at::Tensor& output_buffer, at::Tensor& input_buffer,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) final;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& output_tensors,
      std::vector<std::vector<at::Tensor>>& input_tensors,
      const c10d::ReduceScatterOptions& opts =
          c10d::ReduceScatterOptions()) final;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output_tensor, at::Tensor& input_tensor,
      const c10d::ReduceScatterOptions& opts =
          c10d::ReduceScatterOptions()) final;
  c10::intrusive_ptr<c10d::Work> gather(
      std::vector<std::vector<at::Tensor>>& output_tensors,
      std::vector<at::Tensor>& input_tensors,
      const c10d::GatherOptions& opts = c10d::GatherOptions()) final;
  c10::intrusive_ptr<c10d::Work> scatter(
      std::vector<at::Tensor>& output_tensors,
      std::vector<std::vector<at::Tensor>>& input_tensors,
      const c10d::ScatterOptions& opts = c10d::ScatterOptions()) final;
  c10::intrusive_ptr<c10d::Work> alltoall_base(
      at::Tensor& output_buffer, at::Tensor& input_buffer,
      std::vector<int64_t>& output_split_sizes,
      std::vector<int64_t>& input_split_sizes,
      const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) final;
  c10::intrusive_ptr<c10d::Work> alltoall(
      std::vector<at::Tensor>& output_tensors,
      std::vector<at::Tensor>& input_tensors,
      const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) final;
  c10::intrusive_ptr<c10d::Work> barrier(
      const c10d::BarrierOptions& opts = c10d::BarrierOptions()) final;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors,
                                      int dst_rank, int tag) final;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors,
                                      int src_rank, int tag) final;
  c10::intrusive_ptr<Options> getBackendOptions() override { return options_; }
  void setTimeout(std::chrono::milliseconds timeout) override;
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override { return collectives_; }

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
      const c10d::ReduceScatterOptions& opts =
          c10d::ReduceScatterOptions()) override;

  // Coalescing (torch.distributed's _coalescing_manager, batch_isend_irecv):
  // the operations between start and end are launched as they come, in
  // order; endCoalescing() returns one Work for all of them.
  bool supportsCoalescing() const override { return true; }
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

  // Subgroups without a new rendezvous of the parent (a 2-D DeviceMesh
  // created with init_process_group(device_id=...)).
  bool supportsSplitting() const override { return true; }
  c10::intrusive_ptr<c10d::Backend> split(
      const c10::intrusive_ptr<c10d::Store>& store,
      const std::vector<int>& ranks,
      const c10::intrusive_ptr<Options>& opts) override;

  // Called (from an atexit handler) before the interpreter finalizes: from
  // then on the watcher threads leave completed collectives' futures and
  // tensors alone. Releasing a tensor that has a Python object takes the
  // GIL, which kills a non-Python thread once finalization began, and a
  // watcher dying that way aborts the process.
  static void pythonIsExiting();

  // What the embedding interpreter provides. The library itself has no
  // Python (C++ programs link it); the Python module installs these when it
  // is imported. Without them nothing is ever finalizing and waits block as
  // they are.
  struct InterpreterHooks {
    // True once the interpreter is finalizing.
    bool (*finalizing)();
    // Runs wait() with the interpreter's lock released if the calling
    // thread holds it.
    void (*run_unlocked)(const std::function<void()>& wait);
  };
  static void setInterpreterHooks(const InterpreterHooks& hooks);

 protected:
  CommStreamBackend(int rank, int size, std::chrono::milliseconds timeout);

  // A backend of the same kind for the subgroup this rank is `rank` of.
  virtual c10::intrusive_ptr<c10d::Backend> createSubgroup(
      const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
      std::chrono::milliseconds timeout) = 0;
  // Runs on the communication stream after a collective failed on this
  // rank: tells the peers to stop waiting for it.
  virtual void abortPeers() = 0;
  virtual void onTimeoutChanged(std::chrono::milliseconds /*timeout*/) {}

  // ---- Transport kernels. Each gets the checked arguments of one call as
  // flat host views of contiguous mydev tensors (per-rank lists hold one view
  // per rank) and returns the kernel that runs the exchange on the
  // communication stream. They are called after the group was found
  // launchable and right before the launch, so a transport may number its
  // collectives there.
  using Kernel = std::function<void()>;
  using ReduceOp = c10d::ReduceOp::RedOpType;
  virtual Kernel broadcastKernel(const at::Tensor& data, int root) = 0;
  virtual Kernel allreduceKernel(const at::Tensor& data, ReduceOp op) = 0;
  virtual Kernel reduceKernel(const at::Tensor& data, ReduceOp op,
                              int root) = 0;
  // `outputs`: one view per rank. `name`: the c10d call, for messages.
  virtual Kernel allgatherKernel(const char* name, const at::Tensor& input,
                                 const std::vector<at::Tensor>& outputs) = 0;
  // `output` holds one piece per rank, each the size of `input`.
  virtual Kernel allgatherIntoTensorKernel(const at::Tensor& input,
                                           const at::Tensor& output) = 0;
  // `input` holds one piece per rank, each the size of `output`.
  virtual Kernel reduceScatterKernel(const at::Tensor& input,
                                     const at::Tensor& output, ReduceOp op) = 0;
  // `outputs` (gather) and `inputs` (scatter) are empty off the root.
  virtual Kernel gatherKernel(const at::Tensor& input,
                              const std::vector<at::Tensor>& outputs,
                              int root) = 0;
  virtual Kernel scatterKernel(const std::vector<at::Tensor>& inputs,
                               const at::Tensor& output, int root) = 0;
  // all_to_all_single: `input` and `output` are host views in the tensors'
  // own shapes, `rows` their rows of dim 0 per rank.
  virtual Kernel alltoallBaseKernel(const at::Tensor& input,
                                    const at::Tensor& output,
                                    const AlltoallRows& rows) = 0;
  // all_to_all: one input and one output view per rank.
  virtual Kernel alltoallKernel(const std::vector<at::Tensor>& inputs,
                                const std::vector<at::Tensor>& outputs) = 0;
  virtual Kernel barrierKernel() = 0;
  // Inside a coalescing group a transport may only record the operation and
  // return an empty kernel, running the batch at endCoalescing().
  virtual Kernel pointToPointKernel(bool is_send, const at::Tensor& data,
                                    int peer, int tag) = 0;

  // Fails at once if the group is broken or `device` is not the one this
  // group is bound to (binding it on first use); call before anything that
  // must stay in step with the peers.
  void checkLaunchable(const char* name, c10::Device device);
  // Events, stream order, recordStream, kernel launch, Work and future;
  // `body` runs on the communication stream.
  c10::intrusive_ptr<c10d::Work> launch(c10d::OpType type, const char* name,
                                        c10::Device device,
                                        const std::vector<at::Tensor>& inputs,
                                        const std::vector<at::Tensor>& outputs,
                                        std::function<void()> body);
  // Waits until the communication stream is idle. Subclass destructors call
  // it first: queued kernels use the subclass's transport.
  void drain() noexcept;
  // The device of this group's collectives that carry no tensor (barrier).
  c10::Device defaultDevice(const std::optional<c10::Device>& hint) const;
  std::chrono::milliseconds timeout() const { return timeout_; }

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
    // An item taken from `pending` and not yet handed to `completed`.
    bool busy = false;
    std::condition_variable idle;
    // Completed items, released by the backend's own thread (next launch,
    // destruction), never by the watcher: their tensors may have Python
    // objects, and a non-Python thread releasing one while the interpreter
    // finalizes is killed (abort: "terminate called without an active
    // exception").
    std::vector<Pending> completed;
  };

  // checkLaunchable, then the transport's kernel (`make_kernel()`), then
  // launch().
  c10::intrusive_ptr<c10d::Work> run(c10d::OpType type, const char* name,
                                     c10::Device device,
                                     const std::vector<at::Tensor>& inputs,
                                     const std::vector<at::Tensor>& outputs,
                                     c10::function_ref<Kernel()> make_kernel);
  MydevStream commStream(c10::Device device);
  c10::intrusive_ptr<c10d::Work> coalesced(
      c10d::OpType type, const char* name,
      const std::vector<c10::intrusive_ptr<c10d::Work>>& works,
      const std::vector<at::Tensor>& outputs);
  void watchCompletion(const c10::intrusive_ptr<MycclWork>& work,
                       const std::vector<at::Tensor>& outputs);
  static void watch(const std::shared_ptr<WatchQueue>& queue);
  // Waits (without the GIL) until the watcher completed and released every
  // queued collective, so that none of it is left for interpreter exit.
  void waitForWatcher();
  // Releases the completed items on the calling thread.
  void releaseCompleted();

  c10::intrusive_ptr<Options> options_;
  std::chrono::milliseconds timeout_;
  bool blocking_wait_;
  std::optional<c10::Device> device_;
  std::optional<MydevStream> stream_;
  uint64_t collectives_ = 0;
  // Set (from the executor) once a collective failed: the peers are out of
  // step, so later collectives fail at once.
  std::shared_ptr<std::atomic<bool>> broken_;
  std::shared_ptr<WatchQueue> queue_;
  // Works launched since startCoalescing(), while coalescing.
  std::optional<std::vector<c10::intrusive_ptr<c10d::Work>>> coalescing_;
};

}  // namespace mydev::distributed

// The declarations of every transport kernel above, for a transport's class
// body: the list is long and must match the base exactly, so it is written
// once, here.
#define MYCCL_TRANSPORT_KERNEL_OVERRIDES                                       \
  Kernel broadcastKernel(const at::Tensor& data, int root) override;           \
  Kernel allreduceKernel(const at::Tensor& data, ReduceOp op) override;        \
  Kernel reduceKernel(const at::Tensor& data, ReduceOp op, int root) override; \
  Kernel allgatherKernel(const char* name, const at::Tensor& input,            \
                         const std::vector<at::Tensor>& outputs) override;     \
  Kernel allgatherIntoTensorKernel(const at::Tensor& input,                    \
                                   const at::Tensor& output) override;         \
  Kernel reduceScatterKernel(const at::Tensor& input,                          \
                             const at::Tensor& output, ReduceOp op) override;  \
  Kernel gatherKernel(const at::Tensor& input,                                 \
                      const std::vector<at::Tensor>& outputs, int root)        \
      override;                                                                \
  Kernel scatterKernel(const std::vector<at::Tensor>& inputs,                  \
                       const at::Tensor& output, int root) override;           \
  Kernel alltoallBaseKernel(const at::Tensor& input, const at::Tensor& output, \
                            const AlltoallRows& rows) override;                \
  Kernel alltoallKernel(const std::vector<at::Tensor>& inputs,                 \
                        const std::vector<at::Tensor>& outputs) override;      \
  Kernel barrierKernel() override;                                             \
  Kernel pointToPointKernel(bool is_send, const at::Tensor& data, int peer,    \
                            int tag) override;
