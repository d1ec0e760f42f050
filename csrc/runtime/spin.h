// How the simulator's threads wait: a bounded spin that adapts to the waits
// it sees, then the caller's futex (condition variable) sleep.
//
// A spinning thread holds a core. On a busy host that core is one the
// kernels (running on stream executors and their OpenMP teams) need, so a
// spin only pays when the wait is short: a futex wake-up costs a few
// microseconds, far more than a small kernel, far less than a large one.
// Each waiting place (a stream's executor waiting for work, a synchronize
// waiting for a stream) keeps its own budget: waits that outlast the longest
// spin halve it, down to a few polls; waits shorter than the longest spin
// double it back. A host synchronizing on long kernels (a convolution) thus
// sleeps at once, and a chain of small launches keeps its executor polling.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

namespace mydev_sim {

// The longest spin: covers back-to-back launches from Python (2-3 us apart)
// with room to spare, short enough that an idle executor gives its core
// back almost at once.
constexpr std::chrono::microseconds kMaxSpin{50};
// The shortest: a few polls, so a wait that ends at once never sleeps.
constexpr std::chrono::microseconds kMinSpin{1};

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#else
  std::this_thread::yield();
#endif
}

// Polls `done` for up to `budget`; returns its last value.
template <typename Predicate>
bool spin_until(Predicate done, std::chrono::nanoseconds budget) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  for (;;) {
    for (int i = 0; i < 16; ++i) {
      if (done()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return done();
    // The thread this one waits for is often woken onto this very core
    // (the scheduler places a wakee near its waker): without yielding, it
    // would only run once the spin gives up. On a busy host the yield also
    // lets other processes' threads run.
    std::this_thread::yield();
  }
}

// The spin budget of one waiting place, learnt from how long its waits were.
// Racy updates from several waiters are harmless: any budget between the
// bounds is valid.
class AdaptiveSpin {
 public:
  using Clock = std::chrono::steady_clock;

  // Spins for up to the current budget; true if `done` became true. After a
  // false return the caller sleeps, then reports the wait that began at
  // `start` to record_wait().
  template <typename Predicate>
  bool spin(Predicate done, Clock::time_point start) {
    const std::chrono::nanoseconds budget{
        budget_ns_.load(std::memory_order_relaxed)};
    if (!spin_until(done, budget)) return false;
    record_wait(start);
    return true;
  }

  // The wait that began at `start` just ended.
  void record_wait(Clock::time_point start) {
    const int64_t waited = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               Clock::now() - start)
                               .count();
    const int64_t budget = budget_ns_.load(std::memory_order_relaxed);
    const int64_t next = waited > kMaxNs ? std::max(kMinNs, budget / 2)
                                         : std::min(kMaxNs, budget * 2);
    if (next != budget) budget_ns_.store(next, std::memory_order_relaxed);
  }

 private:
  static constexpr int64_t kMaxNs =
      std::chrono::duration_cast<std::chrono::nanoseconds>(kMaxSpin).count();
  static constexpr int64_t kMinNs =
      std::chrono::duration_cast<std::chrono::nanoseconds>(kMinSpin).count();
  std::atomic<int64_t> budget_ns_{kMaxNs};
};

}  // namespace mydev_sim
