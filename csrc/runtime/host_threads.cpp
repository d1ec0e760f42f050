#include "host_threads.h"

// OpenMP 5.0's pause, bound weakly: the driver carries no OpenMP of its own.
// In the device library (linked with -fopenmp) it is torch's libgomp; in a
// program without OpenMP it is null and there is no team to release.
extern "C" int omp_pause_resource_all(int kind) __attribute__((weak));

namespace mydev_sim {

void release_host_threads() {
  // omp_pause_soft: the team's threads end; libgomp starts new ones at the
  // next parallel region. libgomp frees only the calling thread's team.
  constexpr int kOmpPauseSoft = 1;
  if (omp_pause_resource_all != nullptr) omp_pause_resource_all(kOmpPauseSoft);
}

void release_host_threads_of_submitter() {
  using Clock = std::chrono::steady_clock;
  // A clock read per submission (tens of nanoseconds next to a launch's
  // microseconds); the release itself at most once per interval.
  thread_local Clock::time_point next_release{};
  const Clock::time_point now = Clock::now();
  if (now < next_release) return;
  next_release = now + kReleaseHostThreadsAfter;
  release_host_threads();
}

}  // namespace mydev_sim
