#include "stream.h"

#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <system_error>

#include "activity.h"
#include "capture.h"
#include "device.h"
#include "error.h"
#include "event.h"
#include "fault_handler.h"
#include "host_threads.h"
#include "kernel_gate.h"
#include "lifecycle.h"
#include "parallel_copy.h"

namespace mydev_sim {
namespace {

constexpr uint32_t kLiveMagic = 0x6d796473;
constexpr uint32_t kDeadMagic = 0xdead5173;
// Tasks the executor takes from the queue at a time.
constexpr size_t kBatch = 32;

std::atomic<uint64_t> g_next_stream_id{0};

// The stream whose executor is this thread, so that exit does not wait for
// the task that called exit().
thread_local Stream* t_executor_of = nullptr;

struct HostWaitHooks {
  mydevHostWaitBeginFn_t begin;
  mydevHostWaitEndFn_t end;
};
std::atomic<const HostWaitHooks*> host_wait_hooks{nullptr};

// The hooks of mydevSetHostWaitHooks around one wait (none on an executor:
// its waits are between kernels, holding nothing of the host's).
class HostWaitScope {
 public:
  HostWaitScope()
      : hooks_(t_executor_of == nullptr
                   ? host_wait_hooks.load(std::memory_order_acquire)
                   : nullptr),
        token_(hooks_ != nullptr ? hooks_->begin() : nullptr) {}
  ~HostWaitScope() {
    if (hooks_ != nullptr) hooks_->end(token_);
  }
  HostWaitScope(const HostWaitScope&) = delete;
  HostWaitScope& operator=(const HostWaitScope&) = delete;

 private:
  const HostWaitHooks* hooks_;
  void* token_;
};

int gate_level(int priority) { return priority < 0 ? 0 : 1; }

}  // namespace

Stream::Stream(Device* device, int priority, bool is_default)
    : magic_(kLiveMagic),
      device_(device),
      priority_(priority),
      is_default_(is_default),
      kernel_team_(config().dynamic_threads) {}

mydevError_t Stream::create(Device* device, int priority, bool is_default,
                            Stream** out) {
  // CUDA clamps out-of-range priorities too.
  auto* stream = new Stream(device, priority < 0 ? -1 : 0, is_default);
  note_device_activated();
  try {
    stream->executor_ = std::thread([stream] { stream->executor_main(); });
  } catch (const std::system_error& error) {
    delete stream;
    return fail(mydevErrorMemoryAllocation,
                "mydev:%d: cannot start a stream executor thread: %s",
                device->index(), error.what());
  }
  device->add_stream(stream);
  *out = stream;
  return mydevSuccess;
}

bool Stream::valid() const {
  return magic_.load(std::memory_order_relaxed) == kLiveMagic;
}

void Stream::release() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

uint64_t Stream::enqueue(const Task& task) {
  if (Capture* capture = this->capture()) {
    capture_record(capture, task, this);
    return enqueued();
  }
  // The device is about to run work on the host's cores: a host thread's
  // idle OpenMP team goes (host_threads.h). Executors keep theirs.
  if (t_executor_of == nullptr) release_host_threads_of_submitter();
  Task queued = task;
  queued.activity = activity_enabled() ? activity_begin(task, this) : nullptr;
  const uint64_t sequence = queue_.push(queued);
  // Only a sleeping executor needs the (comparatively slow) futex wake; a
  // spinning one sees the queue grow. The push published the task before
  // this read (both sequentially consistent), and the executor sets the
  // flag before it looks at the queue a last time: one of them sees the
  // other. The mutex orders the wake after that look.
  if (executor_sleeping_.load(std::memory_order_seq_cst)) {
    { std::lock_guard<std::mutex> lock(sleep_mutex_); }
    work_cv_.notify_one();
  }
  return sequence;
}

void Stream::executor_main() {
  char name[16];
  std::snprintf(name, sizeof name, "mydev%d-s%llu", device_->index(),
                static_cast<unsigned long long>(
                    g_next_stream_id.fetch_add(1, std::memory_order_relaxed)));
  pthread_setname_np(pthread_self(), name);
  t_executor_of = this;

  Task batch[kBatch];
  for (;;) {
    const size_t count = queue_.take(batch, kBatch);
    if (count == 0) {
      if (stop_.load(std::memory_order_acquire)) return;
      wait_for_work();
      continue;
    }
    const uint64_t first = queue_.taken() - count + 1;
    for (size_t i = 0; i < count; ++i) execute(batch[i], first + i);
  }
}

void Stream::wait_for_work() {
  // The kernels it woke its team for are done (host_threads.h).
  team_placement_.restore();
  // Spin before sleeping: the next launch usually comes within
  // microseconds, and a futex wake would cost more than the kernel. spin.h
  // says how long.
  const auto start = AdaptiveSpin::Clock::now();
  if (work_spin_.spin([&] { return queue_.has_untaken(); }, start)) return;
  // Asleep, the executor leaves its kernels' team alone for a moment, then
  // keeps it (parked if its threads may still be spinning), then gives it
  // back (host_threads.h).
  bool woke = false;
  if (kernels_ran_since_release_) {
    woke = sleep_until_work(std::chrono::steady_clock::now() +
                            kParkKernelTeamAfter);
    if (!woke) {
      const auto now = std::chrono::steady_clock::now();
      const auto release_at = now + kReleaseKernelTeamAfter;
      const TeamThreads team = team_threads();
      // Parked, the team wakes when this returns: steered first.
      const auto sleep = [&] {
        const bool work = sleep_until_work(release_at);
        if (work) team_placement_.steer_away(team.ids);
        return work;
      };
      woke = team_spin_.may_spin(now) && team.any_running
                 ? park_host_threads_while(sleep)
                 : sleep();
    }
    if (!woke) {
      release_host_threads();
      kernels_ran_since_release_ = false;
    }
  }
  if (!woke) {
    // Released, it keeps its team's size current (host_threads.h).
    while (!sleep_until_work(kernel_team_.next_measure())) {
      kernel_team_.keep_current(KernelTeam::Clock::now());
    }
  }
  team_spin_.note_woken();
  work_spin_.record_wait(start);
}

bool Stream::sleep_until_work(
    std::optional<std::chrono::steady_clock::time_point> deadline) {
  std::unique_lock<std::mutex> lock(sleep_mutex_);
  const auto has_work = [&] {
    return queue_.has_untaken() || stop_.load(std::memory_order_relaxed);
  };
  bool work = false;
  for (;;) {
    // Launches read the flag after queueing (see enqueue): either they see
    // it and wake this thread, or the check below sees their task.
    executor_sleeping_.store(true, std::memory_order_seq_cst);
    if (has_work()) {
      work = true;
      break;
    }
    if (!deadline.has_value()) {
      work_cv_.wait(lock);
    } else if (work_cv_.wait_until(lock, *deadline) ==
               std::cv_status::timeout) {
      work = has_work();
      break;
    }
  }
  executor_sleeping_.store(false, std::memory_order_relaxed);
  return work;
}

void Stream::execute(const Task& task, uint64_t sequence) {
  // busy_ before the check, exit sets its flag before reading busy_: either
  // exit waits for this task or this task sees the flag (both seq_cst).
  busy_.store(true, std::memory_order_seq_cst);
  if (shutting_down()) park_for_exit();
  switch (task.kind) {
    case TaskKind::Kernel: run_kernel(task); break;
    case TaskKind::Copy: {
      const int64_t start = task.activity ? activity_now() : 0;
      copy_bytes(task.dst, task.src, task.count);
      report_illegal_access(device_, "memcpy");
      if (task.activity) activity_finish(task.activity, start, activity_now());
      break;
    }
    case TaskKind::Fill: {
      const int64_t start = task.activity ? activity_now() : 0;
      fill_bytes(task.dst, task.fill_value, task.count);
      report_illegal_access(device_, "memset");
      if (task.activity) activity_finish(task.activity, start, activity_now());
      break;
    }
    case TaskKind::EventMarker:
      task.record->time_ns.store(
          std::chrono::duration_cast<std::chrono::nanoseconds>(
              std::chrono::steady_clock::now().time_since_epoch())
              .count(),
          std::memory_order_relaxed);
      task.record->release();
      break;
    case TaskKind::WaitEvent:
      task.record->stream->wait(task.record->sequence, /*spin=*/true);
      task.record->release();
      break;
  }
  // seq_cst pairs with the waiter's seq_cst store of wake_at_ in wait():
  // either this load sees the waiter's target, or the waiter sees the new
  // count and does not sleep.
  completed_.store(sequence, std::memory_order_seq_cst);
  busy_.store(false, std::memory_order_release);
  // Only the task a sleeping waiter waits for wakes it (see wake_at_).
  if (sequence >= wake_at_.load(std::memory_order_seq_cst)) {
    // Under the mutex: the waiter is asleep (or has not yet checked), and
    // waiters for later tasks lower wake_at_ again once woken.
    {
      std::lock_guard<std::mutex> lock(done_mutex_);
      wake_at_.store(kNobodyWaits, std::memory_order_seq_cst);
    }
    done_cv_.notify_all();
  }
}

void Stream::run_kernel(const Task& task) {
  {
    KernelSlot slot(device_->gate(), gate_level(priority_));
    if (!shutting_down()) {
      const KernelTeam::Clock::time_point began =
          kernel_team_.keep_current(KernelTeam::Clock::now());
      kernels_ran_since_release_ = true;
      // Timed once the kernel holds a compute slot: that is when it runs.
      const int64_t start = task.activity ? activity_now() : 0;
      try {
        task.fn(task.dst);
      } catch (const std::exception& error) {
        device_->record_failure(format("kernel '%s' failed on mydev:%d: %s",
                                       task.name, device_->index(),
                                       error.what()));
      } catch (...) {
        device_->record_failure(
            format("kernel '%s' failed on mydev:%d: unknown exception",
                   task.name, device_->index()));
      }
      kernel_team_.keep_after_kernel();
      team_spin_.note_kernel(began, KernelTeam::Clock::now());
      if (task.release != nullptr) task.release(task.dst);
      report_illegal_access(device_, task.name);
      if (task.activity) activity_finish(task.activity, start, activity_now());
      return;
    }
  }
  park_for_exit();
}

// The process is exiting: run nothing more, and never return, so the thread
// does not unwind (thread-local destructors of kernel libraries) while the
// main thread runs static destructors. exit() ends the thread.
void Stream::park_for_exit() {
  busy_.store(false, std::memory_order_seq_cst);
  std::unique_lock<std::mutex> lock(sleep_mutex_);
  for (;;) work_cv_.wait(lock);
}

void Stream::wait(uint64_t sequence, bool spin) {
  auto reached = [&] {
    return completed_.load(std::memory_order_seq_cst) >= sequence ||
           shutting_down();
  };
  if (reached()) return;
  const HostWaitScope host_wait;
  const auto start = AdaptiveSpin::Clock::now();
  if (spin && done_spin_.spin(reached, start)) return;
  std::unique_lock<std::mutex> lock(done_mutex_);
  while (!reached()) {
    // Ask to be woken by this task, not by every task before it.
    if (sequence < wake_at_.load(std::memory_order_relaxed)) {
      wake_at_.store(sequence, std::memory_order_seq_cst);
    }
    if (reached()) break;
    done_cv_.wait(lock);
  }
  if (spin) done_spin_.record_wait(start);
}

void Stream::destroy() {
  magic_.store(kDeadMagic, std::memory_order_relaxed);
  device_->remove_stream(this);
  wait(enqueued(), /*spin=*/true);
  // A parked executor never ends: leave the stream to the exiting process.
  if (shutting_down()) return;
  {
    std::lock_guard<std::mutex> lock(sleep_mutex_);
    stop_.store(true, std::memory_order_release);
  }
  work_cv_.notify_one();
  executor_.join();
  release();
}

void Stream::wake_waiters_for_exit() {
  { std::lock_guard<std::mutex> lock(done_mutex_); }
  done_cv_.notify_all();
}

void Stream::wait_idle_for_exit(
    std::chrono::steady_clock::time_point deadline) {
  if (t_executor_of == this) return;
  while (busy_.load(std::memory_order_seq_cst) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

void set_host_wait_hooks(mydevHostWaitBeginFn_t begin,
                         mydevHostWaitEndFn_t end) {
  // Installed once or twice per process (module import): the previous pair
  // stays allocated, as a waiting thread may still be using it.
  host_wait_hooks.store(begin != nullptr && end != nullptr
                            ? new HostWaitHooks{begin, end}
                            : nullptr,
                        std::memory_order_release);
}

mydevError_t resolve_stream(mydevStream_t handle, Stream** out) {
  if (handle == nullptr) {
    Device* device = nullptr;
    if (mydevError_t status = get_device(current_device(), &device)) {
      return status;
    }
    return device->default_stream(out);
  }
  Stream* stream = Stream::from_handle(handle);
  if (!stream->valid()) {
    return fail(mydevErrorInvalidHandle,
                "%p is not a valid mydev stream (destroyed?)",
                static_cast<void*>(handle));
  }
  *out = stream;
  return mydevSuccess;
}

mydevError_t synchronize_stream(Stream* stream) {
  stream->wait(stream->enqueued(), /*spin=*/true);
  return stream->device()->report_failure();
}

mydevError_t finish_enqueue(Stream* stream) {
  // A capturing stream ran nothing: there is nothing to wait for.
  return config().launch_blocking && stream->capture() == nullptr
             ? synchronize_stream(stream)
             : mydevSuccess;
}

}  // namespace mydev_sim
