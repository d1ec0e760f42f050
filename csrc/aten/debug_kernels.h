// Kernels that exist for testing the device itself, like torch.cuda._sleep.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

namespace mydev {

// Occupies the current stream for `milliseconds` without blocking the host.
// Demos and benchmarks use it; tests use a StreamLatch, which orders work
// without depending on how long anything takes.
void sleepOnCurrentStream(int64_t milliseconds);

// A kernel that fails with `message`: the way tests prove that device-side
// errors surface at the next synchronizing call.
void failOnCurrentStream(const char* message);

// A host-side latch that a debug kernel waits on. A test queues the kernel
// with holdCurrentStream(), queues the work it wants to observe behind it,
// checks that nothing has run yet (the stream reports not ready, outputs are
// unwritten), then calls release(): "the host returned before the kernel ran"
// and "B waited for A" become facts the test controls instead of races
// against a sleep.
class StreamLatch {
 public:
  void release();
  bool released() const;
  // True once the holding kernel has started waiting: the stream has reached
  // the latch (everything queued before it has run).
  bool reached() const;
  // Blocks the host until the holding kernel runs or `timeout` passes;
  // returns reached().
  bool waitUntilReached(std::chrono::milliseconds timeout);

  // The holding kernel's side: marks the latch reached, then waits for
  // release(); false when `timeout` passed first.
  bool holdUntilReleased(std::chrono::milliseconds timeout);

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  bool reached_ = false;
  bool released_ = false;
};

// Queues on the current stream a kernel that blocks it until `latch` is
// released. It occupies one of the device's compute units while it waits, as
// a spinning kernel on a GPU would. If `timeout` passes first the kernel
// fails (an error at the next synchronizing call, naming the latch) instead
// of hanging a test that never released it.
void holdCurrentStream(std::shared_ptr<StreamLatch> latch,
                       std::chrono::milliseconds timeout);

}  // namespace mydev
