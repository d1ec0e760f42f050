// Kernel closures handed back by the driver, destroyed on a launching thread
// (why: kernel_launch.h, ClosureBase).
#include "kernel_launch.h"

#include <atomic>

namespace mydev::detail {
namespace {

// A lock-free stack: executors push one closure at a time, launching
// threads take the whole stack at once (so no pop can see a recycled node).
// A plain pointer, constant-initialized: closures retired after the last
// launch are left to the exiting process.
std::atomic<ClosureBase*> retired{nullptr};

}  // namespace

void retireClosure(ClosureBase* closure) {
  ClosureBase* head = retired.load(std::memory_order_relaxed);
  do {
    closure->next_retired = head;
  } while (!retired.compare_exchange_weak(head, closure,
                                          std::memory_order_release,
                                          std::memory_order_relaxed));
}

void destroyRetiredClosures() {
  if (retired.load(std::memory_order_relaxed) == nullptr) {
    return;
  }
  ClosureBase* closure = retired.exchange(nullptr, std::memory_order_acquire);
  while (closure != nullptr) {
    ClosureBase* next = closure->next_retired;
    delete closure;
    closure = next;
  }
}

}  // namespace mydev::detail
