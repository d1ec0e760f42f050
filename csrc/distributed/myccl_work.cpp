#include "myccl_work.h"

#include "../core/mydev_stream.h"
#include "collective_checks.h"

namespace mydev::distributed {

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
                     std::vector<at::Tensor> outputs,
                     std::shared_ptr<WorkState> state,
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
  const bool waited_on_host = blocking_wait_ || timeout != ::kNoTimeout;
  if (waited_on_host) {
    // The kernel gives up by itself after the group timeout; the margin
    // covers a loaded machine.
    const auto limit = timeout != ::kNoTimeout
                           ? timeout
                           : timeout_ + std::chrono::milliseconds(30000);
    if (!state_->waitDone(limit)) {
      throwDistError(c10::str("myccl: wait() on ", name_, " timed out after ",
                              limit.count(), " ms"));
    }
  }
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    error = state_->error;
  }
  if (waited_on_host || error) {
    // The kernel has finished. A failure it left on the device is reported
    // here, which clears it there; a later synchronizing call would raise
    // it a second time otherwise.
    done_event_->synchronize();
  }
  if (error) {
    std::rethrow_exception(error);
  }
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> MycclWork::getFuture() {
  return future_;
}

}  // namespace mydev::distributed
