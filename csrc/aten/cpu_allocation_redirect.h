// The one change the C++ library makes to torch's global state: torch's CPU
// allocator is wrapped so that a kernel can have the CPU allocations of an
// ATen CPU kernel it runs land in device outputs (see the .cpp for why, and
// docs/torch_patches.md for when it can go).
//
// Outside a redirect scope the wrapper forwards every call to the allocator
// it wraps, after one thread-local check. Inside one (a kernel body on a
// stream's executor, running a CPU kernel over host views), the n-th CPU
// allocation of exactly a target's size gets that target's memory.
#pragma once

#include <c10/util/SmallVector.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>

namespace mydev {

// A device output a CPU allocation may take.
struct RedirectTarget {
  void* kernel_address = nullptr;  // of its memory (a host view's data)
  size_t nbytes = 0;
  // Takes the CPU allocation of `nbytes` bytes that comes after `ordinal`
  // others of that size (kernels often allocate scratch of their output's
  // size first: oneDNN's blocked-layout result, before the dense one).
  uint32_t ordinal = 0;
  bool taken = false;  // set when a CPU allocation got this memory
};

// While running (from construction to stop()), CPU allocations on this
// thread are redirected into `targets`, which must outlive the scope. Only a
// kernel body may create one (device memory is reachable only there). Memory
// handed out stays the device output's: freeing its CPU tensor frees
// nothing.
class RedirectCpuAllocations {
 public:
  explicit RedirectCpuAllocations(
      c10::SmallVectorImpl<RedirectTarget>& targets);
  ~RedirectCpuAllocations() { stop(); }
  RedirectCpuAllocations(const RedirectCpuAllocations&) = delete;
  RedirectCpuAllocations& operator=(const RedirectCpuAllocations&) = delete;

  // Ends the redirection on this thread; what was recorded stays readable.
  void stop();

  // Which allocation of `nbytes` bytes (0: the first) returned `address`
  // while the scope ran, counting the last one at that address; none if
  // it was not recorded. Only sizes of targets are recorded.
  std::optional<uint32_t> ordinalOf(const void* address, size_t nbytes) const;

  // The allocator's side: the memory for an allocation of `nbytes`, or null
  // to allocate normally (then record() the address it got).
  void* take(size_t nbytes);
  void record(size_t nbytes, void* address);

 private:
  // Targets of one size, by ordinal, and how many allocations of that size
  // came so far.
  struct SizeGroup {
    size_t nbytes = 0;
    uint32_t seen = 0;
    size_t next = 0;  // first entry of `targets` not passed yet
    c10::SmallVector<std::pair<uint32_t, RedirectTarget*>, 2> targets;
  };
  SizeGroup* groupOf(size_t nbytes);

  c10::SmallVector<SizeGroup, 4> groups_;
  // (size, address) of every allocation of a target's size, in order.
  c10::SmallVector<std::pair<size_t, const void*>, 16> log_;
  RedirectCpuAllocations* previous_ = nullptr;
  bool running_ = false;
};

// True while a CPU tensor (or raw allocation) still holds the memory of
// `target`, handed out to it: a CPU kernel kept an allocation beyond its
// call.
bool stillHeld(const RedirectTarget& target);

}  // namespace mydev
