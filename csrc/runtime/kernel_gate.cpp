#include "kernel_gate.h"

namespace mydev_sim {

void KernelGate::acquire(int level) {
  std::unique_lock<std::mutex> lock(mutex_);
  // A free slot is only taken directly when nobody queues, or a burst of new
  // low-priority kernels could overtake a waiting high-priority one.
  if (free_ > 0 && waiting_[0].empty() && waiting_[1].empty()) {
    --free_;
    return;
  }
  Waiter self;
  waiting_[level].push_back(&self);
  self.cv.wait(lock, [&] { return self.granted; });
}

void KernelGate::release() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (std::deque<Waiter*>& queue : waiting_) {
    if (queue.empty()) continue;
    Waiter* next = queue.front();
    queue.pop_front();
    // The slot passes straight to the waiter. Notify under the lock: the
    // waiter's condition variable lives on its stack and is gone as soon as
    // it sees `granted`.
    next->granted = true;
    next->cv.notify_one();
    return;
  }
  ++free_;
}

}  // namespace mydev_sim
