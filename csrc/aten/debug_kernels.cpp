#include "debug_kernels.h"

#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "kernel_launch.h"

namespace mydev {

void sleepOnCurrentStream(int64_t milliseconds) {
  TORCH_CHECK(milliseconds >= 0, "_sleep: milliseconds must be >= 0, got ",
              milliseconds);
  launchKernel("_sleep", [milliseconds] {
    std::this_thread::sleep_for(std::chrono::milliseconds(milliseconds));
  });
}

void failOnCurrentStream(const char* message) {
  launchKernel("_fail", [text = std::string(message)] {
    throw std::runtime_error(text);
  });
}

void StreamLatch::release() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    released_ = true;
  }
  changed_.notify_all();
}

bool StreamLatch::released() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return released_;
}

bool StreamLatch::reached() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return reached_;
}

bool StreamLatch::waitUntilReached(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  return changed_.wait_for(lock, timeout, [this] { return reached_; });
}

bool StreamLatch::holdUntilReleased(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  reached_ = true;
  changed_.notify_all();
  return changed_.wait_for(lock, timeout, [this] { return released_; });
}

void holdCurrentStream(std::shared_ptr<StreamLatch> latch,
                       std::chrono::milliseconds timeout) {
  TORCH_CHECK(latch != nullptr, "_hold_stream: latch is None");
  TORCH_CHECK(timeout.count() > 0, "_hold_stream: timeout must be > 0 ms, got ",
              timeout.count());
  launchKernel("_hold_stream", [latch = std::move(latch), timeout] {
    if (!latch->holdUntilReleased(timeout)) {
      throw std::runtime_error("the stream latch was not released within " +
                               std::to_string(timeout.count()) + " ms");
    }
  });
}

}  // namespace mydev
