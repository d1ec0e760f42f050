// A stream's queue of tasks: any number of launching threads push, one
// executor takes, and the executor takes without a lock.
//
// One mutex used to guard the queue on both sides. Its cache line then
// moved between the host's core and the executor's at every launch, and a
// launch often found the executor holding it (perf, bmm on 1x1x1 tensors:
// lock and unlock, of this queue and the allocator together, were 8% of the
// process's samples, of which the launching thread had 57%). Now only
// launching threads share a mutex, which one launching thread finds where
// it left it; the executor sees a task once `pushed()` counts it.
//
// Tasks live in fixed blocks linked in order: the queue grows by linking a
// block, never by moving tasks the executor may be reading.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "task.h"

namespace mydev_sim {

class TaskQueue {
 public:
  TaskQueue();
  ~TaskQueue();
  TaskQueue(const TaskQueue&) = delete;
  TaskQueue& operator=(const TaskQueue&) = delete;

  // Any thread. Returns the task's sequence number (1 for the first). The
  // count is published sequentially consistent, so a thread that then reads
  // a flag the executor set before looking at the queue (the stream's
  // "sleeping") sees it, or the executor sees the task.
  uint64_t push(const Task& task);
  // Tasks pushed so far (the last sequence number).
  uint64_t pushed() const { return pushed_.load(std::memory_order_acquire); }

  // Executor only: moves up to `max` of the oldest tasks into `out` and
  // returns how many; the first has sequence number taken() - count + 1.
  size_t take(Task* out, size_t max);
  // Executor only: tasks taken so far.
  uint64_t taken() const { return taken_; }
  // Executor only: whether a task waits (sequentially consistent: see push).
  bool has_untaken() const {
    return pushed_.load(std::memory_order_seq_cst) != taken_;
  }

 private:
  static constexpr size_t kBlockTasks = 256;
  struct Block {
    Task tasks[kBlockTasks];
    std::atomic<Block*> next{nullptr};
  };

  // Launching threads' side.
  alignas(64) std::mutex push_mutex_;
  Block* tail_block_;
  std::atomic<uint64_t> pushed_{0};
  // The executor's side.
  alignas(64) Block* head_block_;
  uint64_t taken_ = 0;
  // A block the executor is done with, for the next push that needs one.
  alignas(64) std::atomic<Block*> spare_{nullptr};
};

}  // namespace mydev_sim
