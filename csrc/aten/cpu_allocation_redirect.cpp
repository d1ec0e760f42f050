// Why torch's CPU allocator is wrapped: many ATen CPU kernels exist only in
// functional form. Convolutions are the costly case: `convolution.out` is
// torchgen's generated "run the functional kernel, then copy into out". A
// device kernel running it computes into host memory that the CPU kernel
// allocates, then copies that into the device output: one more write of the
// output than the CPU does (about 10% of a 3x3 convolution, more of a
// depthwise one). With the wrapper, the kernel names its device outputs as
// targets, the functional CPU kernel's own output allocation gets the
// device output's memory, and nothing is copied. kernel_results.cpp checks
// where each result landed and copies the ones that did not (the kernel
// allocated differently this time), so results never depend on the
// redirection.
//
// Device memory stays opaque to the host: the addresses handed out are
// kernel-side addresses (host views' data), redirected to only inside a
// kernel body, and the CPU tensors holding them die with the kernel.
//
// Installed once, when the library loads. Listed in docs/torch_patches.md
// with when it can go: when ATen's CPU kernels that matter (convolutions)
// get real out= kernels, or torch lets a backend give a functional kernel
// its output memory.
#include "cpu_allocation_redirect.h"

#include "kernel_scratch_cache.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/macros/Macros.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

namespace mydev {
namespace {

// The scope running on this thread; null almost always.
thread_local RedirectCpuAllocations* t_running = nullptr;

// Allocations of a target's size recorded per scope, for learning which one
// a kernel returns; beyond this many the rest are not recorded.
constexpr size_t kMaxRecorded = 256;

// Memory handed out and not released yet. Global: a raw allocation (oneDNN
// allocates its scratch through raw_allocate) may be freed on any thread.
// The count keeps the common free, of memory never handed out, lock-free.
struct HandedOut {
  std::atomic<size_t> count{0};
  std::mutex mutex;
  std::vector<void*> addresses;
};

HandedOut& handedOut() {
  static auto* registry = new HandedOut();  // leaked: frees at exit use it
  return *registry;
}

void hold(void* address) {
  HandedOut& registry = handedOut();
  const std::lock_guard<std::mutex> lock(registry.mutex);
  registry.addresses.push_back(address);
  registry.count.fetch_add(1, std::memory_order_release);
}

// True if `address` was handed out (and is now released).
bool release(void* address) {
  HandedOut& registry = handedOut();
  if (registry.count.load(std::memory_order_acquire) == 0) {
    return false;
  }
  const std::lock_guard<std::mutex> lock(registry.mutex);
  auto found =
      std::find(registry.addresses.begin(), registry.addresses.end(), address);
  if (found == registry.addresses.end()) {
    return false;
  }
  registry.addresses.erase(found);
  registry.count.fetch_sub(1, std::memory_order_release);
  return true;
}

// The deleter of handed-out memory: it is a device output, owned by the
// device tensor, so there is nothing to free.
void releaseHandedOut(void* address) { release(address); }

c10::DeleterFnPtr g_wrapped_raw_deleter = nullptr;

void rawDelete(void* address) {
  if (!release(address) && !releaseKernelScratch(address)) {
    g_wrapped_raw_deleter(address);
  }
}

class RedirectingCpuAllocator final : public c10::Allocator {
 public:
  explicit RedirectingCpuAllocator(c10::Allocator* wrapped)
      : wrapped_(wrapped) {
    g_wrapped_raw_deleter = wrapped->raw_deleter();
  }

  c10::DataPtr allocate(size_t nbytes) override {
    if (C10_LIKELY(t_running == nullptr)) {
      return wrapped_->allocate(nbytes);
    }
    if (void* memory = t_running->take(nbytes)) {
      return {memory, memory, &releaseHandedOut, c10::Device(c10::kCPU)};
    }
    // Not an output: the CPU kernel's scratch.
    c10::DataPtr allocated = allocateKernelScratch(*wrapped_, nbytes);
    t_running->record(nbytes, allocated.get());
    return allocated;
  }

  // Handed-out memory has its data as context, as raw_allocate requires.
  c10::DeleterFnPtr raw_deleter() const override {
    return g_wrapped_raw_deleter != nullptr ? &rawDelete : nullptr;
  }

  bool is_simple_data_ptr(const c10::DataPtr& data_ptr) const override {
    return wrapped_->is_simple_data_ptr(data_ptr);
  }

  void copy_data(void* dest, const void* src, size_t count) const override {
    wrapped_->copy_data(dest, src, count);
  }

 private:
  c10::Allocator* wrapped_;
};

// If another CPU allocator replaces this one later (set with a higher
// priority), nothing is redirected any more and every result is copied.
struct InstallRedirectingCpuAllocator {
  InstallRedirectingCpuAllocator() {
    // Leaked: CPU tensors freed during shutdown still call it.
    c10::SetCPUAllocator(new RedirectingCpuAllocator(c10::GetCPUAllocator()));
  }
} install_redirecting_cpu_allocator;

}  // namespace

RedirectCpuAllocations::RedirectCpuAllocations(
    c10::SmallVectorImpl<RedirectTarget>& targets) {
  for (RedirectTarget& target : targets) {
    SizeGroup* group = groupOf(target.nbytes);
    if (group == nullptr) {
      groups_.emplace_back();
      group = &groups_.back();
      group->nbytes = target.nbytes;
    }
    group->targets.emplace_back(target.ordinal, &target);
  }
  for (SizeGroup& group : groups_) {
    std::stable_sort(
        group.targets.begin(), group.targets.end(),
        [](const auto& a, const auto& b) { return a.first < b.first; });
  }
  previous_ = t_running;
  t_running = this;
  running_ = true;
}

void RedirectCpuAllocations::stop() {
  if (running_) {
    t_running = previous_;
    running_ = false;
  }
}

RedirectCpuAllocations::SizeGroup* RedirectCpuAllocations::groupOf(
    size_t nbytes) {
  for (SizeGroup& group : groups_) {
    if (group.nbytes == nbytes) {
      return &group;
    }
  }
  return nullptr;
}

void* RedirectCpuAllocations::take(size_t nbytes) {
  SizeGroup* group = groupOf(nbytes);
  if (group == nullptr) {
    return nullptr;
  }
  const uint32_t ordinal = group->seen++;
  // Targets whose ordinal passed (another target of the same ordinal took
  // that allocation) stay untaken.
  while (group->next < group->targets.size() &&
         group->targets[group->next].first < ordinal) {
    ++group->next;
  }
  if (group->next == group->targets.size() ||
      group->targets[group->next].first != ordinal) {
    return nullptr;
  }
  RedirectTarget* target = group->targets[group->next++].second;
  target->taken = true;
  hold(target->kernel_address);
  record(nbytes, target->kernel_address);
  return target->kernel_address;
}

void RedirectCpuAllocations::record(size_t nbytes, void* address) {
  if (log_.size() < kMaxRecorded && groupOf(nbytes) != nullptr) {
    log_.emplace_back(nbytes, address);
  }
}

std::optional<uint32_t> RedirectCpuAllocations::ordinalOf(const void* address,
                                                          size_t nbytes) const {
  std::optional<uint32_t> found;
  uint32_t ordinal = 0;
  for (const auto& [size, recorded] : log_) {
    if (size != nbytes) {
      continue;
    }
    if (recorded == address) {
      found = ordinal;
    }
    ++ordinal;
  }
  return found;
}

bool stillHeld(const RedirectTarget& target) {
  if (!target.taken) {
    return false;
  }
  HandedOut& registry = handedOut();
  const std::lock_guard<std::mutex> lock(registry.mutex);
  return std::find(registry.addresses.begin(), registry.addresses.end(),
                   target.kernel_address) != registry.addresses.end();
}

}  // namespace mydev
