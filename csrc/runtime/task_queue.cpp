#include "task_queue.h"

#include <algorithm>

namespace mydev_sim {

TaskQueue::TaskQueue() : tail_block_(new Block), head_block_(tail_block_) {}

TaskQueue::~TaskQueue() {
  for (Block* block = head_block_; block != nullptr;) {
    Block* next = block->next.load(std::memory_order_relaxed);
    delete block;
    block = next;
  }
  delete spare_.load(std::memory_order_relaxed);
}

uint64_t TaskQueue::push(const Task& task) {
  std::lock_guard<std::mutex> lock(push_mutex_);
  const uint64_t index = pushed_.load(std::memory_order_relaxed);
  const size_t slot = index % kBlockTasks;
  if (slot == 0 && index != 0) {
    // The executor may still read the full block; the task goes to a new
    // one, linked before the count below publishes the task.
    Block* fresh = spare_.exchange(nullptr, std::memory_order_acquire);
    if (fresh == nullptr) {
      fresh = new Block;
    } else {
      fresh->next.store(nullptr, std::memory_order_relaxed);
    }
    tail_block_->next.store(fresh, std::memory_order_relaxed);
    tail_block_ = fresh;
  }
  tail_block_->tasks[slot] = task;
  pushed_.store(index + 1, std::memory_order_seq_cst);
  return index + 1;
}

size_t TaskQueue::take(Task* out, size_t max) {
  // Acquire: the tasks counted, and the blocks linked for them, are visible.
  const uint64_t available = pushed_.load(std::memory_order_acquire) - taken_;
  const size_t count = static_cast<size_t>(std::min<uint64_t>(available, max));
  for (size_t i = 0; i < count; ++i, ++taken_) {
    const size_t slot = taken_ % kBlockTasks;
    if (slot == 0 && taken_ != 0) {
      // Past the block's last task, which no push touches any more (pushes
      // fill a later block): it becomes the spare.
      Block* done = head_block_;
      head_block_ = done->next.load(std::memory_order_relaxed);
      delete spare_.exchange(done, std::memory_order_release);
    }
    out[i] = head_block_->tasks[slot];
  }
  return count;
}

}  // namespace mydev_sim
