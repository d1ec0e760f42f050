// Kernel closures handed back by the driver, destroyed on a launching thread
// (why: kernel_launch.h, ClosureBase).
#include "kernel_launch.h"

#include <atomic>

namespace mydev::detail {
namespace {

// A lock-free stack: executors push one closure at a time, launching
// threads take the whole stack at once (so no pop can see a recycled node).
// A plain pointer, constant-initialized: closures retired after the last
// launch are left to the exiting process. Executors and launching threads
// both write it at every kernel: on a line of its own (the struct fills
// it), it moves between their cores alone, not with what lies beside it.
struct alignas(64) RetiredStack {
  std::atomic<ClosureBase*> head{nullptr};
} retired;

// The closures a launching thread took and has not destroyed yet. It
// destroys a few per launch rather than the whole batch at once: malloc's
// per-thread cache holds only a few chunks of each size, and a batch would
// overflow it into the shared (locked) free lists.
// A thread that ends hands what it holds back to the shared stack, for
// another thread to destroy (never destroyed at exit: a closure may hold a
// CPU tensor whose Python object outlives the interpreter).
struct TakenClosures {
  ClosureBase* head = nullptr;
  ~TakenClosures();
};

// Two per launch: the launch adds one, so a backlog shrinks.
constexpr int kDestroyedPerLaunch = 2;

}  // namespace

void retireClosure(ClosureBase* closure) {
  ClosureBase* head = retired.head.load(std::memory_order_relaxed);
  do {
    closure->next_retired = head;
  } while (!retired.head.compare_exchange_weak(
      head, closure, std::memory_order_release, std::memory_order_relaxed));
}

TakenClosures::~TakenClosures() {
  while (head != nullptr) {
    ClosureBase* next = head->next_retired;
    retireClosure(head);
    head = next;
  }
}

void destroyRetiredClosures() {
  thread_local TakenClosures taken;
  if (taken.head == nullptr) {
    if (retired.head.load(std::memory_order_relaxed) == nullptr) {
      return;
    }
    taken.head = retired.head.exchange(nullptr, std::memory_order_acquire);
  }
  for (int i = 0; i < kDestroyedPerLaunch && taken.head != nullptr; ++i) {
    ClosureBase* next = taken.head->next_retired;
    delete taken.head;
    taken.head = next;
  }
}

}  // namespace mydev::detail
