#include "comm_stream_backend.h"

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>

#include "../aten/kernel_launch.h"
#include "../core/caching_allocator.h"
#include "../core/device.h"
#include "collective_checks.h"

namespace mydev::distributed {
namespace {

std::atomic<bool> python_exiting{false};

std::atomic<bool (*)()> interpreter_finalizing{nullptr};
std::atomic<void (*)(const std::function<void()>&)> run_unlocked{nullptr};

// The flag covers exits that run atexit handlers; the interpreter's
// finalizing state the rest (it turns true a little later, once the handlers
// ran).
bool mustLeavePythonObjectsAlone() {
  if (python_exiting.load()) {
    return true;
  }
  bool (*finalizing)() = interpreter_finalizing.load();
  return finalizing != nullptr && finalizing();
}

}  // namespace

void CommStreamBackend::pythonIsExiting() { python_exiting.store(true); }

void CommStreamBackend::setInterpreterHooks(const InterpreterHooks& hooks) {
  interpreter_finalizing.store(hooks.finalizing);
  run_unlocked.store(hooks.run_unlocked);
}

CommStreamBackend::CommStreamBackend(int rank, int size,
                                     std::chrono::milliseconds timeout)
    : c10d::Backend(rank, size),
      options_(c10::make_intrusive<Options>("myccl", timeout)),
      timeout_(timeout),
      broken_(std::make_shared<std::atomic<bool>>(false)),
      queue_(std::make_shared<WatchQueue>()) {
  const char* blocking = std::getenv("MYCCL_BLOCKING_WAIT");
  blocking_wait_ = blocking != nullptr && std::strcmp(blocking, "1") == 0;
  std::thread([queue = queue_] { watch(queue); }).detach();
}

CommStreamBackend::~CommStreamBackend() {
  drain();
  waitForWatcher();
  releaseCompleted();
  {
    std::lock_guard<std::mutex> lock(queue_->mutex);
    queue_->stopping = true;
  }
  // The watcher completes what is queued and exits by itself.
  queue_->cv.notify_all();
}

void CommStreamBackend::waitForWatcher() {
  auto wait = [this] {
    std::unique_lock<std::mutex> lock(queue_->mutex);
    // Bounded: a callback that blocks must not hang the destruction.
    queue_->idle.wait_for(lock, std::chrono::seconds(10), [&] {
      return queue_->pending.empty() && !queue_->busy;
    });
  };
  // destroy_process_group() usually destroys the backend with the GIL held;
  // the watcher may need it to run a future's callbacks or release tensors.
  void (*unlocked)(const std::function<void()>&) = run_unlocked.load();
  if (unlocked != nullptr) {
    unlocked(wait);
  } else {
    wait();
  }
}

void CommStreamBackend::releaseCompleted() {
  std::vector<Pending> completed;
  {
    std::lock_guard<std::mutex> lock(queue_->mutex);
    completed.swap(queue_->completed);
  }
}

void CommStreamBackend::drain() noexcept {
  if (stream_) {
    try {
      // Each kernel gives up after the timeout at worst.
      stream_->synchronize();
    } catch (...) {
    }
  }
}

void CommStreamBackend::setTimeout(std::chrono::milliseconds timeout) {
  timeout_ = timeout;
  options_->timeout = timeout;
  onTimeoutChanged(timeout);
}

void CommStreamBackend::watch(const std::shared_ptr<WatchQueue>& queue) {
  for (;;) {
    {
      Pending item;
      {
        std::unique_lock<std::mutex> lock(queue->mutex);
        queue->cv.wait(
            lock, [&] { return queue->stopping || !queue->pending.empty(); });
        if (queue->pending.empty()) {
          return;
        }
        item = std::move(queue->pending.front());
        queue->pending.pop_front();
        queue->busy = true;
      }
      item.state->waitDone(std::chrono::milliseconds(0));
      if (mustLeavePythonObjectsAlone()) {
        // Completing the future would run Python callbacks: the process is
        // exiting, so leave it.
        new Pending(std::move(item));
      } else {
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
      std::lock_guard<std::mutex> lock(queue->mutex);
      if (item.future) {
        queue->completed.push_back(std::move(item));
      }
      queue->busy = false;
    }
    queue->idle.notify_all();
  }
}

void CommStreamBackend::watchCompletion(
    const c10::intrusive_ptr<MycclWork>& work,
    const std::vector<at::Tensor>& outputs) {
  {
    std::lock_guard<std::mutex> lock(queue_->mutex);
    queue_->pending.push_back(Pending{work->state(), work->future(), outputs});
  }
  queue_->cv.notify_all();
}

MydevStream CommStreamBackend::commStream(c10::Device device) {
  TORCH_CHECK(device.type() == c10::DeviceType::PrivateUse1, "myccl handles ",
              kDeviceName, " tensors only, got ", device);
  if (!device_) {
    device_ = device;
    stream_ = getStreamFromPool(0, device.index());
  }
  TORCH_CHECK(*device_ == device,
              "myccl: a process group uses one device per process; "
              "this one is bound to ",
              *device_, ", got a tensor on ", device);
  return *stream_;
}

c10::Device CommStreamBackend::defaultDevice(
    const std::optional<c10::Device>& hint) const {
  if (device_) {
    return *device_;
  }
  if (hint && hint->type() == c10::DeviceType::PrivateUse1) {
    return *hint;
  }
  return c10::Device(c10::DeviceType::PrivateUse1, currentDevice());
}

void CommStreamBackend::checkLaunchable(const char* name, c10::Device device) {
  if (broken_->load()) {
    throwDistError(
        c10::str("myccl: ", name, " on rank ", rank_,
                 ": an earlier collective of this process group failed; "
                 "destroy the group and create a new one"));
  }
  commStream(device);
}

c10::intrusive_ptr<c10d::Work> CommStreamBackend::launch(
    c10d::OpType type, const char* name, c10::Device device,
    const std::vector<at::Tensor>& inputs,
    const std::vector<at::Tensor>& outputs, std::function<void()> body) {
  checkLaunchable(name, device);
  releaseCompleted();
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
  ++collectives_;
  auto state = std::make_shared<WorkState>();
  const int rank = rank_;
  launchKernel(
      name, stream,
      [this, body = std::move(body), state, broken = broken_, name, rank] {
        try {
          if (broken->load()) {
            throwDistError(c10::str("myccl: ", name, " on rank ", rank,
                                    ": an earlier collective of this process "
                                    "group failed"));
          }
          body();
        } catch (...) {
          broken->store(true);
          abortPeers();
          state->finish(std::current_exception());
          throw;
        }
        state->finish(nullptr);
      });
  auto done = std::make_shared<MydevEvent>();
  done->record(stream);
  // barrier() is a host barrier (as NCCL's, whose wait synchronizes).
  const bool blocking = blocking_wait_ || type == c10d::OpType::BARRIER;
  auto work = c10::make_intrusive<MycclWork>(type, name, device, outputs, state,
                                             done, blocking, timeout_);
  watchCompletion(work, outputs);
  if (coalescing_) {
    coalescing_->push_back(work);
  }
  return work;
}

c10::intrusive_ptr<c10d::Work> CommStreamBackend::coalesced(
    c10d::OpType type, const char* name,
    const std::vector<c10::intrusive_ptr<c10d::Work>>& works,
    const std::vector<at::Tensor>& outputs) {
  if (works.empty()) {
    return launch(type, name, defaultDevice(std::nullopt), {}, {}, [] {});
  }
  auto last = c10::static_intrusive_pointer_cast<MycclWork>(works.back());
  auto work = c10::make_intrusive<MycclWork>(
      type, name, last->device(), outputs, last->state(), last->doneEvent(),
      blocking_wait_, timeout_);
  watchCompletion(work, outputs);
  return work;
}

c10::intrusive_ptr<c10d::Work> CommStreamBackend::allreduce_coalesced(
    std::vector<at::Tensor>& tensors,
    const c10d::AllreduceCoalescedOptions& opts) {
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  for (at::Tensor& tensor : tensors) {
    std::vector<at::Tensor> one{tensor};
    works.push_back(allreduce(one, opts));
  }
  return coalesced(c10d::OpType::ALLREDUCE_COALESCED, "allreduce_coalesced",
                   works, tensors);
}

c10::intrusive_ptr<c10d::Work>
CommStreamBackend::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(
      outputs.size() == inputs.size(),
      "myccl: allgather_into_tensor_coalesced needs as many outputs as inputs");
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  for (size_t i = 0; i < inputs.size(); ++i) {
    works.push_back(_allgather_base(outputs[i], inputs[i], opts));
  }
  return coalesced(c10d::OpType::COALESCED, "allgather_into_tensor_coalesced",
                   works, outputs);
}

c10::intrusive_ptr<c10d::Work>
CommStreamBackend::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(
      outputs.size() == inputs.size(),
      "myccl: reduce_scatter_tensor_coalesced needs as many outputs as inputs");
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  for (size_t i = 0; i < inputs.size(); ++i) {
    works.push_back(_reduce_scatter_base(outputs[i], inputs[i], opts));
  }
  return coalesced(c10d::OpType::COALESCED, "reduce_scatter_tensor_coalesced",
                   works, outputs);
}

void CommStreamBackend::startCoalescing() {
  TORCH_CHECK(!coalescing_,
              "myccl: startCoalescing() while already coalescing");
  coalescing_.emplace();
}

c10::intrusive_ptr<c10d::Work> CommStreamBackend::endCoalescing() {
  TORCH_CHECK(coalescing_, "myccl: endCoalescing() without startCoalescing()");
  std::vector<c10::intrusive_ptr<c10d::Work>> works = std::move(*coalescing_);
  coalescing_.reset();
  std::vector<at::Tensor> outputs;
  for (const auto& work : works) {
    for (const at::Tensor& t : work->result()) {
      outputs.push_back(t);
    }
  }
  return coalesced(c10d::OpType::COALESCED, "coalesced", works, outputs);
}

c10::intrusive_ptr<c10d::Backend> CommStreamBackend::split(
    const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
    const c10::intrusive_ptr<Options>& opts) {
  const auto it = std::find(ranks.begin(), ranks.end(), rank_);
  if (it == ranks.end()) {
    return nullptr;  // not a member: torch skips this backend
  }
  // torch hands every device's backend the same store; keep our keys apart
  // from gloo's, as init_process_group does with a "<device>/" prefix.
  auto own_store = c10::make_intrusive<c10d::PrefixStore>(kDeviceName, store);
  const auto timeout = opts ? opts->timeout : timeout_;
  return createSubgroup(own_store, static_cast<int>(it - ranks.begin()),
                        static_cast<int>(ranks.size()), timeout);
}

}  // namespace mydev::distributed
