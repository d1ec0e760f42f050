#include "parallel_copy.h"

#include <pthread.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "align.h"
#include "device.h"

namespace mydev_sim {
namespace {

constexpr size_t kParallelThreshold = size_t{4} << 20;
// Below this a chunk is not worth handing to another thread.
constexpr size_t kMinChunk = size_t{1} << 20;
constexpr size_t kChunkAlignment = 4096;

// One parallel copy or fill, living on the caller's stack. Chunk claims and
// completions happen under the pool mutex, so a helper never touches the job
// after the caller saw it finished.
struct Job {
  char* dst;
  const char* src;  // nullptr for a fill
  int value;
  size_t count;
  size_t chunk_size;
  size_t chunks;
  size_t next = 0;
  size_t done = 0;

  void run_chunk(size_t index) const {
    const size_t begin = index * chunk_size;
    const size_t length = std::min(chunk_size, count - begin);
    if (src != nullptr) {
      std::memcpy(dst + begin, src + begin, length);
    } else {
      std::memset(dst + begin, value, length);
    }
  }
};

class HelperPool {
 public:
  explicit HelperPool(int helpers) {
    for (int i = 0; i < helpers; ++i) {
      try {
        std::thread([this] { helper_main(); }).detach();
      } catch (const std::system_error&) {
        break;  // fewer helpers only means a slower copy
      }
    }
  }

  // The calling thread works on the job too, and returns when it is done.
  void run(Job& job) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      jobs_.push_back(&job);
    }
    work_cv_.notify_all();
    std::unique_lock<std::mutex> lock(mutex_);
    size_t index = 0;
    while (claim(job, &index)) {
      lock.unlock();
      job.run_chunk(index);
      lock.lock();
      ++job.done;
    }
    done_cv_.wait(lock, [&] { return job.done == job.chunks; });
  }

 private:
  // Under mutex_. Unlists the job once its last chunk is claimed.
  bool claim(Job& job, size_t* index) {
    if (job.next == job.chunks) return false;
    *index = job.next++;
    if (job.next == job.chunks) {
      jobs_.erase(std::find(jobs_.begin(), jobs_.end(), &job));
    }
    return true;
  }

  void helper_main() {
    pthread_setname_np(pthread_self(), "mydev-copy");
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      work_cv_.wait(lock, [&] { return !jobs_.empty(); });
      Job& job = *jobs_.front();
      size_t index = 0;
      claim(job, &index);
      lock.unlock();
      job.run_chunk(index);
      lock.lock();
      if (++job.done == job.chunks) done_cv_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  std::vector<Job*> jobs_;
};

HelperPool& pool() {
  // Never destroyed: its threads are detached and live as long as the
  // process, like the executors.
  static HelperPool* instance = new HelperPool(kernel_slots() - 1);
  return *instance;
}

void run_split(Job job) {
  job.chunks = std::min(size_t(kernel_slots()), job.count / kMinChunk);
  job.chunk_size =
      round_up((job.count + job.chunks - 1) / job.chunks, kChunkAlignment);
  job.chunks = (job.count + job.chunk_size - 1) / job.chunk_size;
  pool().run(job);
}

}  // namespace

void copy_bytes(void* dst, const void* src, size_t count) {
  const char* from = static_cast<const char*>(src);
  char* to = static_cast<char*>(dst);
  const bool overlap = from < to + count && to < from + count;
  if (count < kParallelThreshold || overlap) {
    std::memmove(dst, src, count);
    return;
  }
  run_split(Job{to, from, 0, count, 0, 0});
}

void fill_bytes(void* dst, int value, size_t count) {
  if (count < kParallelThreshold) {
    std::memset(dst, value, count);
    return;
  }
  run_split(Job{static_cast<char*>(dst), nullptr, value, count, 0, 0});
}

}  // namespace mydev_sim
