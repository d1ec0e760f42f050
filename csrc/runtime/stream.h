// A stream: an in-order task queue run by its own executor thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <thread>

#include "host_threads.h"
#include "mydev_runtime.h"
#include "spin.h"
#include "task_queue.h"

namespace mydev_sim {

class Capture;
class Device;
struct EventRecord;

// Reference counted: event records keep their stream alive after
// mydevStreamDestroy, so that querying such an event stays valid.
class Stream {
 public:
  // The new stream holds one reference, the handle's.
  static mydevError_t create(Device* device, int priority, bool is_default,
                             Stream** out);
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  static Stream* from_handle(mydevStream_t handle) {
    return reinterpret_cast<Stream*>(handle);
  }
  mydevStream_t handle() { return reinterpret_cast<mydevStream_t>(this); }
  // False once destroyed; a handle whose memory was freed is undefined
  // behaviour, as on CUDA.
  bool valid() const;

  Device* device() const { return device_; }
  int priority() const { return priority_; }
  bool is_default() const { return is_default_; }

  // Returns the task's sequence number (1 for the first task). While the
  // stream is capturing, the task goes to the capture (capture.h) instead
  // and the stream's last sequence number is returned.
  uint64_t enqueue(const Task& task);
  // The capture this stream records into, or nullptr (capture.cpp sets it).
  Capture* capture() const { return capture_.load(std::memory_order_acquire); }
  void set_capture(Capture* capture) {
    capture_.store(capture, std::memory_order_release);
  }
  uint64_t enqueued() const { return queue_.pushed(); }
  uint64_t completed() const {
    return completed_.load(std::memory_order_acquire);
  }
  // Until completed() >= sequence, spinning briefly first if `spin` (see
  // spin.h for how long).
  void wait(uint64_t sequence, bool spin);

  // Waits for the stream's work, stops the executor, invalidates the handle
  // and drops the handle's reference.
  void destroy();

  void retain() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void release();

  // Exit, in two passes over all streams: first wake every waiter, then
  // wait (until the deadline) for the task in flight.
  void wake_waiters_for_exit();
  void wait_idle_for_exit(std::chrono::steady_clock::time_point deadline);

 private:
  Stream(Device* device, int priority, bool is_default);
  ~Stream() = default;

  void executor_main();
  void execute(const Task& task, uint64_t sequence);
  void run_kernel(const Task& task);
  [[noreturn]] void park_for_exit();
  // Spins, then sleeps, until a task is queued or the stream stops.
  void wait_for_work();
  // Sleeps until a task is queued or the stream stops (true), or until
  // `deadline` (false; none: no deadline).
  bool sleep_until_work(
      std::optional<std::chrono::steady_clock::time_point> deadline);

  std::atomic<uint32_t> magic_;
  Device* const device_;
  const int priority_;
  const bool is_default_;
  std::atomic<int> refs_{1};
  std::atomic<Capture*> capture_{nullptr};

  TaskQueue queue_;
  AdaptiveSpin work_spin_;  // the executor waiting for work
  // The executor's sleep. Launching threads read the flag at every launch
  // and take the mutex only to wake it (see enqueue), so the flag sits on a
  // line the executor writes only when it falls asleep or wakes.
  alignas(64) std::atomic<bool> executor_sleeping_{false};
  std::atomic<bool> stop_{false};
  std::mutex sleep_mutex_;
  std::condition_variable work_cv_;

  // Written by the executor after every task: kept off the cache line that
  // enqueueing threads write.
  alignas(64) std::atomic<uint64_t> completed_{0};
  std::atomic<bool> busy_{false};  // a task is in flight (for exit)
  // The first task whose completion a thread asleep in wait() waits for
  // (kNobodyWaits: none). Waking the waiter after every task instead cost a
  // synchronize behind N queued kernels N futex wake-ups, each taking a core
  // from the kernels' OpenMP team: it showed on short convolutions (the
  // depthwise row of benchmarks/eager.py). Lowered by waiters, reset by the
  // executor when it wakes them; both under done_mutex_.
  static constexpr uint64_t kNobodyWaits = UINT64_MAX;
  std::atomic<uint64_t> wake_at_{kNobodyWaits};
  std::mutex done_mutex_;
  std::condition_variable done_cv_;
  AdaptiveSpin done_spin_;  // threads waiting for the stream's work

  KernelTeam kernel_team_;  // the executor's own
  // Kernels ran since the executor last released its team (host_threads.h),
  // so it may have one to park. Executor-thread state.
  bool kernels_ran_since_release_ = false;
  TeamSpin team_spin_;            // whether parking the team is worth it
  TeamPlacement team_placement_;  // its team's CPUs as it wakes after a sleep
  std::thread executor_;
};

// mydevSetHostWaitHooks: the hooks Stream::wait calls on host threads.
void set_host_wait_hooks(mydevHostWaitBeginFn_t begin,
                         mydevHostWaitEndFn_t end);

// nullptr means the current device's default stream, as on CUDA.
mydevError_t resolve_stream(mydevStream_t handle, Stream** out);
// Waits for everything enqueued on the stream so far, then reports its
// device's pending failure.
mydevError_t synchronize_stream(Stream* stream);
// The end of every enqueueing call: with launch blocking, synchronize.
mydevError_t finish_enqueue(Stream* stream);

}  // namespace mydev_sim
