// Bounded busy-waiting, used where a wake-up through a futex would cost more
// than the expected wait.
#pragma once

#include <chrono>
#include <thread>

namespace mydev_sim {

// Long enough to cover back-to-back launches, short enough that an idle
// stream's executor gives its core back almost at once.
constexpr std::chrono::microseconds kSpinDuration{50};

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#else
  std::this_thread::yield();
#endif
}

// Polls `done` for up to kSpinDuration; returns its last value.
template <typename Predicate>
bool spin_until(Predicate done) {
  const auto deadline = std::chrono::steady_clock::now() + kSpinDuration;
  for (;;) {
    for (int i = 0; i < 16; ++i) {
      if (done()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return done();
    // The thread this one waits for is often woken onto this very core
    // (the scheduler places a wakee near its waker): without yielding, it
    // would only run once the spin gives up.
    std::this_thread::yield();
  }
}

}  // namespace mydev_sim
