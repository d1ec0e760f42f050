#include "host_memory.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <shared_mutex>

#include "align.h"
#include "error.h"
#include "lifecycle.h"

namespace mydev_sim {
namespace {

struct Registry {
  std::shared_mutex mutex;
  std::map<uintptr_t, size_t> allocations;  // base -> requested size
};

Registry& registry() {
  static Registry* instance = new Registry;  // never destroyed, like devices
  return *instance;
}

size_t mapped_size(size_t size) { return round_up(size, page_size()); }

}  // namespace

bool find_host_allocation(const void* ptr, char** base, size_t* size) {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  Registry& reg = registry();
  std::shared_lock<std::shared_mutex> lock(reg.mutex);
  auto it = reg.allocations.upper_bound(address);
  if (it == reg.allocations.begin()) return false;
  --it;
  if (address >= it->first + it->second) return false;
  *base = reinterpret_cast<char*>(it->first);
  *size = it->second;
  return true;
}

}  // namespace mydev_sim

using namespace mydev_sim;

extern "C" {

mydevError_t mydevHostAlloc(void** ptr, size_t size) {
  if (mydevError_t status = enter()) return status;
  if (ptr == nullptr) {
    return fail(mydevErrorInvalidValue, "mydevHostAlloc: ptr is null");
  }
  if (size == 0) {
    *ptr = nullptr;
    return mydevSuccess;
  }
  void* memory = mmap(nullptr, mapped_size(size), PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) {
    return fail(mydevErrorMemoryAllocation,
                "mydevHostAlloc: cannot allocate %zu bytes of pinned host "
                "memory: %s",
                size, std::strerror(errno));
  }
  // Best effort: RLIMIT_MEMLOCK is often small, and unlocked memory only
  // differs from locked memory in being swappable.
  (void)mlock(memory, mapped_size(size));
  Registry& reg = registry();
  {
    std::unique_lock<std::shared_mutex> lock(reg.mutex);
    reg.allocations.emplace(reinterpret_cast<uintptr_t>(memory), size);
  }
  *ptr = memory;
  return mydevSuccess;
}

mydevError_t mydevHostFree(void* ptr) {
  if (mydevError_t status = enter()) return status;
  if (ptr == nullptr) return mydevSuccess;
  size_t size;
  {
    Registry& reg = registry();
    std::unique_lock<std::shared_mutex> lock(reg.mutex);
    const auto it = reg.allocations.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == reg.allocations.end()) {
      return fail(mydevErrorInvalidValue,
                  "mydevHostFree: %p was not returned by mydevHostAlloc (or "
                  "was already freed)",
                  ptr);
    }
    size = it->second;
    reg.allocations.erase(it);
  }
  munmap(ptr, mapped_size(size));
  return mydevSuccess;
}

}  // extern "C"
