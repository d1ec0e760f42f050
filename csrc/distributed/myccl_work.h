// The Work object of every myccl collective: completion state set by the
// collective's kernel, a done-event on the communication stream, a future.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>

#include "../core/mydev_event.h"

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
  const c10::intrusive_ptr<c10::ivalue::Future>& future() const {
    return future_;
  }

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

}  // namespace mydev::distributed
