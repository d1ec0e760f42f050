// A device's compute units: at most `slots` kernels run at once on a device,
// whatever the number of streams. When several streams wait for a slot, the
// higher-priority stream gets it first (FIFO within a priority level).
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>

namespace mydev_sim {

class KernelGate {
 public:
  static constexpr int kLevels = 2;  // 0: high priority, 1: normal

  explicit KernelGate(int slots) : free_(slots) {}
  KernelGate(const KernelGate&) = delete;
  KernelGate& operator=(const KernelGate&) = delete;

  void acquire(int level);
  void release();

 private:
  struct Waiter {
    std::condition_variable cv;
    bool granted = false;
  };

  std::mutex mutex_;
  int free_;
  std::deque<Waiter*> waiting_[kLevels];
};

// Holds a slot for the lifetime of a kernel, including when it throws.
class KernelSlot {
 public:
  KernelSlot(KernelGate& gate, int level) : gate_(gate) {
    gate_.acquire(level);
  }
  ~KernelSlot() { gate_.release(); }
  KernelSlot(const KernelSlot&) = delete;
  KernelSlot& operator=(const KernelSlot&) = delete;

 private:
  KernelGate& gate_;
};

}  // namespace mydev_sim
