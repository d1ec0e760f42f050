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

}  // namespace mydev_sim
