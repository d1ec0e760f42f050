#include "parallel.h"

#include <ATen/Config.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <exception>

#if AT_PARALLEL_OPENMP
#include <omp.h>
#endif

namespace mydev::custom_ops {
namespace {

int64_t divup(int64_t a, int64_t b) { return (a + b - 1) / b; }

#if AT_PARALLEL_OPENMP
struct Region {
  int64_t begin;
  int64_t end;
  int64_t grain;
  RangeFn fn;
  const void* context;
  std::atomic_flag failed = ATOMIC_FLAG_INIT;
  std::exception_ptr error;
};

// Each thread of the team takes its chunk (as at::internal::invoke_parallel).
void regionBody(void* data) {
  auto* region = static_cast<Region*>(data);
  int64_t tasks = omp_get_num_threads();
  tasks = std::min(tasks, divup(region->end - region->begin, region->grain));
  const int64_t chunk = divup(region->end - region->begin, tasks);
  const int64_t begin = region->begin + omp_get_thread_num() * chunk;
  if (begin >= region->end) {
    return;
  }
  try {
    region->fn(region->context, begin, std::min(region->end, begin + chunk));
  } catch (...) {
    if (!region->failed.test_and_set()) {
      region->error = std::current_exception();
    }
  }
}
#endif

}  // namespace

void parallelFor(int64_t begin, int64_t end, int64_t grain, RangeFn fn,
                 const void* context) {
  if (begin >= end) {
    return;
  }
  grain = std::max<int64_t>(grain, 1);
#if AT_PARALLEL_OPENMP
  if (end - begin > grain && at::get_num_threads() > 1 && !omp_in_parallel()) {
    Region region{begin, end, grain, fn, context};
    // A team of the default size (omp_get_max_threads, which
    // torch.set_num_threads sets); like ATen, no num_threads clause.
#pragma omp parallel
    regionBody(&region);
    if (region.error) {
      std::rethrow_exception(region.error);
    }
    return;
  }
#endif
  fn(context, begin, end);
}

}  // namespace mydev::custom_ops
