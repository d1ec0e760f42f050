// Peer memory (mydevIpc*). A handle names an allocation by its owner's pid,
// the owner's device memory and page table memfds (descriptor numbers, plus
// the memory file's device and inode so that a recycled pid or descriptor is
// detected) and the allocation's offset and size in the owner's device
// slot. Opening it takes duplicates of the owner's memfds (pidfd_getfd, or
// /proc/<pid>/fd/<n> where that is refused), reads which physical pages back
// the allocation from the owner's page table, and maps them at fresh device
// addresses of this process's peer window (address_space.h), so that a peer
// pointer translates like any device pointer.
//
// A collective opens its peers' buffers on every call, so mappings outlive
// their close: the next open of the same allocation, still backed by the
// same pages, reuses the mapping and its page tables instead of an mmap and
// a page-table refill.
#include "ipc.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "address_space.h"
#include "device.h"
#include "device_memory.h"
#include "error.h"
#include "lifecycle.h"
#include "range_allocator.h"

namespace mydev_sim {
namespace {

constexpr uint32_t kHandleMagic = 0x4d594951;  // "MYIQ"
// Closed mappings kept for reuse; beyond this the oldest goes.
constexpr size_t kIdleMappings = 64;

struct HandleData {
  uint32_t magic;
  int32_t owner_pid;
  int32_t device;
  int32_t memory_fd;
  int32_t page_table_fd;
  uint64_t file_device;  // st_dev and st_ino of the memory memfd
  uint64_t file_inode;
  uint64_t offset;  // of the allocation in the owner's device slot
  uint64_t size;
};
static_assert(sizeof(HandleData) <= MYDEV_IPC_HANDLE_SIZE,
              "the handle data must fit mydevIpcMemHandle_t");

// (owner pid, st_dev, st_ino): one peer device's memory.
using PeerKey = std::tuple<int, uint64_t, uint64_t>;

struct PeerDevice {
  int memory_fd;
  const uint32_t* page_table;  // read-only view of the owner's table
  size_t page_table_entries;
};

struct PeerMapping {
  PeerKey key;
  int device;  // the owner's device index
  uint64_t offset;
  std::vector<uint32_t> pages;  // the owner's page table entries
  char* base;                   // device address in the peer window
  size_t open_count;
};

std::mutex g_peers_mutex;
// Kept until exit: a descriptor and a page-table view per peer device.
std::map<PeerKey, PeerDevice> g_peer_devices;
std::list<PeerMapping> g_mappings;        // most recently used first
RangeAllocator* g_peer_window = nullptr;  // in device pages

// A descriptor of the owner's memfd `fd`, or -1 and the reasons in `why`.
int take_peer_fd(int pid, int fd, std::string* why) {
#if defined(SYS_pidfd_open) && defined(SYS_pidfd_getfd)
  const int pidfd = int(syscall(SYS_pidfd_open, pid, 0));
  if (pidfd >= 0) {
    const int taken = int(syscall(SYS_pidfd_getfd, pidfd, fd, 0));
    const int err = errno;
    close(pidfd);
    if (taken >= 0) return taken;
    *why = format("pidfd_getfd: %s", std::strerror(err));
  } else {
    *why = format("pidfd_open: %s", std::strerror(errno));
  }
#endif
  // Needs only "read" ptrace access to the peer, which pidfd_getfd's
  // "attach" check may refuse (e.g. Yama's ptrace_scope=1 for siblings).
  const std::string path = format("/proc/%d/fd/%d", pid, fd);
  const int opened = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (opened >= 0) return opened;
  *why += format("%sopen(%s): %s", why->empty() ? "" : "; ", path.c_str(),
                 std::strerror(errno));
  return -1;
}

mydevError_t refuse(const HandleData& data, const std::string& why) {
  return fail(mydevErrorPeerAccessUnsupported,
              "mydevIpcOpenMemHandle: cannot map peer memory of process %d "
              "(mydev:%d): %s",
              data.owner_pid, data.device, why.c_str());
}

mydevError_t open_own(const HandleData& data, void** ptr) {
  Device* device = nullptr;
  if (mydevError_t status = get_device(data.device, &device)) return status;
  DeviceMemory* memory = device->existing_memory();
  if (memory == nullptr || memory->memory_fd() != data.memory_fd) {
    return fail(mydevErrorInvalidValue,
                "mydevIpcOpenMemHandle: the handle names mydev:%d memory of "
                "this process that does not exist",
                data.device);
  }
  *ptr = memory->slot_base() + data.offset;
  return mydevSuccess;
}

// Under g_peers_mutex.
mydevError_t peer_device(const HandleData& data, PeerDevice** out) {
  const PeerKey key{data.owner_pid, data.file_device, data.file_inode};
  auto found = g_peer_devices.find(key);
  if (found != g_peer_devices.end()) {
    *out = &found->second;
    return mydevSuccess;
  }
  std::string why;
  const int memory_fd = take_peer_fd(data.owner_pid, data.memory_fd, &why);
  if (memory_fd < 0) return refuse(data, why);
  struct stat st {};
  if (fstat(memory_fd, &st) != 0 || uint64_t(st.st_dev) != data.file_device ||
      uint64_t(st.st_ino) != data.file_inode) {
    close(memory_fd);
    return refuse(data,
                  "the process no longer has that device memory "
                  "(it exited, or its pid was reused)");
  }
  const int table_fd = take_peer_fd(data.owner_pid, data.page_table_fd, &why);
  struct stat table_st {};
  void* table = MAP_FAILED;
  if (table_fd >= 0 && fstat(table_fd, &table_st) == 0) {
    table = mmap(nullptr, size_t(table_st.st_size), PROT_READ, MAP_SHARED,
                 table_fd, 0);
    why = std::strerror(errno);
  }
  if (table_fd >= 0) close(table_fd);
  if (table == MAP_FAILED) {
    close(memory_fd);
    return refuse(data, "cannot read its page table: " + why);
  }
  const PeerDevice device{memory_fd, static_cast<const uint32_t*>(table),
                          size_t(table_st.st_size) / sizeof(uint32_t)};
  *out = &g_peer_devices.emplace(key, device).first->second;
  return mydevSuccess;
}

void unmap(const PeerMapping& mapping) {
  const size_t pages = mapping.pages.size();
  unmap_kernel_pages(
      static_cast<char*>(kernel_address(*address_space(), mapping.base)),
      pages * kDevicePageSize);
  const size_t first =
      size_t(mapping.base - address_space()->peer_base) / kDevicePageSize;
  g_peer_window->release(first, pages);
}

// Device addresses for `pages` pages in the peer window, dropping idle
// mappings when it is full.
bool reserve_in_window(size_t pages, size_t* first) {
  if (g_peer_window->allocate(pages, first)) return true;
  for (auto it = g_mappings.begin(); it != g_mappings.end();) {
    if (it->open_count == 0) {
      unmap(*it);
      it = g_mappings.erase(it);
    } else {
      ++it;
    }
  }
  return g_peer_window->allocate(pages, first);
}

// Under g_peers_mutex: a new mapping of `pages` (the owner's table entries)
// from `device`'s memory.
mydevError_t map_peer(const HandleData& data, const PeerDevice& device,
                      std::vector<uint32_t> pages, PeerMapping* out) {
  size_t first = 0;
  if (!reserve_in_window(pages.size(), &first)) {
    return refuse(data, "this process's window for peer memory is full");
  }
  const AddressSpace& space = *address_space();
  char* const base = space.peer_base + first * kDevicePageSize;
  char* const kernel = static_cast<char*>(kernel_address(space, base));
  for (size_t page = 0; page < pages.size();) {
    size_t run = 1;
    while (page + run < pages.size() && pages[page] != 0 &&
           pages[page + run] == pages[page] + run) {
      ++run;
    }
    // Unmapped pages of the owner's range stay unmapped here too.
    if (pages[page] != DeviceMemory::kUnmapped &&
        !map_kernel_pages(kernel + page * kDevicePageSize,
                          run * kDevicePageSize, device.memory_fd,
                          size_t(pages[page] - 1) * kDevicePageSize)) {
      const int err = errno;
      unmap_kernel_pages(kernel, pages.size() * kDevicePageSize);
      g_peer_window->release(first, pages.size());
      return refuse(data, format("mmap: %s", std::strerror(err)));
    }
    page += run;
  }
  const PeerKey key{data.owner_pid, data.file_device, data.file_inode};
  *out = PeerMapping{key, data.device, data.offset, std::move(pages), base, 1};
  return mydevSuccess;
}

mydevError_t open_peer(const HandleData& data, void** ptr) {
  std::lock_guard<std::mutex> lock(g_peers_mutex);
  if (g_peer_window == nullptr) {
    g_peer_window =
        new RangeAllocator(address_space()->peer_size / kDevicePageSize);
  }
  PeerDevice* device = nullptr;
  if (mydevError_t status = peer_device(data, &device)) return status;
  const size_t first = size_t(data.offset) / kDevicePageSize;
  const size_t count =
      (size_t(data.size) + kDevicePageSize - 1) / kDevicePageSize;
  if (first + count > device->page_table_entries) {
    return fail(
        mydevErrorInvalidValue,
        "mydevIpcOpenMemHandle: not a handle from mydevIpcGetMemHandle");
  }
  std::vector<uint32_t> pages(device->page_table + first,
                              device->page_table + first + count);
  const PeerKey key{data.owner_pid, data.file_device, data.file_inode};
  for (auto it = g_mappings.begin(); it != g_mappings.end(); ++it) {
    if (it->key == key && it->offset == data.offset && it->pages == pages) {
      ++it->open_count;
      *ptr = it->base;
      g_mappings.splice(g_mappings.begin(), g_mappings, it);
      return mydevSuccess;
    }
  }
  PeerMapping mapping;
  if (mydevError_t status =
          map_peer(data, *device, std::move(pages), &mapping)) {
    return status;
  }
  *ptr = mapping.base;
  g_mappings.push_front(std::move(mapping));
  size_t idle = 0;
  for (auto it = g_mappings.begin(); it != g_mappings.end();) {
    if (it->open_count == 0 && ++idle > kIdleMappings) {
      unmap(*it);
      it = g_mappings.erase(it);
    } else {
      ++it;
    }
  }
  return mydevSuccess;
}

}  // namespace

bool find_peer_allocation(const void* ptr, int* device, char** base,
                          size_t* size) {
  const char* address = static_cast<const char*>(ptr);
  const AddressSpace& space = *address_space();
  if (size_t(address - space.peer_base) >= space.peer_size) return false;
  std::lock_guard<std::mutex> lock(g_peers_mutex);
  for (const PeerMapping& mapping : g_mappings) {
    const size_t bytes = mapping.pages.size() * kDevicePageSize;
    if (mapping.open_count > 0 && address >= mapping.base &&
        address < mapping.base + bytes) {
      *device = mapping.device;
      *base = mapping.base;
      *size = bytes;
      return true;
    }
  }
  return false;
}

bool peer_memory_supported() {
  if (!config().peer_memory) return false;
  static const bool supported = [] {
#if defined(SYS_pidfd_open)
    const int pidfd = int(syscall(SYS_pidfd_open, getpid(), 0));
    if (pidfd >= 0) {
      close(pidfd);
      return true;
    }
#endif
    return access("/proc/self/fd", R_OK) == 0;
  }();
  return supported;
}

}  // namespace mydev_sim

using namespace mydev_sim;

extern "C" {

mydevError_t mydevIpcGetMemHandle(mydevIpcMemHandle_t* handle, void* devPtr) {
  if (mydevError_t status = enter()) return status;
  if (handle == nullptr) {
    return fail(mydevErrorInvalidValue, "mydevIpcGetMemHandle: handle is null");
  }
  Device* device = device_of_address(devPtr);
  DeviceMemory* memory =
      device != nullptr ? device->existing_memory() : nullptr;
  char* base = nullptr;
  size_t size = 0;
  if (memory == nullptr || !memory->find(devPtr, &base, &size)) {
    return fail(mydevErrorInvalidValue,
                "mydevIpcGetMemHandle: %p is not in a live device allocation",
                devPtr);
  }
  struct stat st {};
  if (fstat(memory->memory_fd(), &st) != 0) {
    return fail(mydevErrorInvalidValue, "mydevIpcGetMemHandle: fstat: %s",
                std::strerror(errno));
  }
  HandleData data{};
  data.magic = kHandleMagic;
  data.owner_pid = int32_t(getpid());
  data.device = device->index();
  data.memory_fd = memory->memory_fd();
  data.page_table_fd = memory->page_table_fd();
  data.file_device = uint64_t(st.st_dev);
  data.file_inode = uint64_t(st.st_ino);
  data.offset = uint64_t(base - memory->slot_base());
  data.size = size;
  *handle = mydevIpcMemHandle_t{};
  std::memcpy(handle->reserved, &data, sizeof(data));
  return mydevSuccess;
}

mydevError_t mydevIpcOpenMemHandle(void** devPtr, mydevIpcMemHandle_t handle) {
  if (mydevError_t status = enter()) return status;
  if (devPtr == nullptr) {
    return fail(mydevErrorInvalidValue,
                "mydevIpcOpenMemHandle: devPtr is null");
  }
  HandleData data;
  std::memcpy(&data, handle.reserved, sizeof(data));
  if (data.magic != kHandleMagic || data.size == 0 ||
      data.offset % kDevicePageSize != 0) {
    return fail(
        mydevErrorInvalidValue,
        "mydevIpcOpenMemHandle: not a handle from mydevIpcGetMemHandle");
  }
  if (data.owner_pid == int32_t(getpid())) return open_own(data, devPtr);
  if (!config().peer_memory) {
    return refuse(data, "MYDEV_PEER_MEMORY=0");
  }
  return open_peer(data, devPtr);
}

mydevError_t mydevIpcCloseMemHandle(void* devPtr) {
  if (mydevError_t status = enter()) return status;
  if (device_of_address(devPtr) != nullptr) return mydevSuccess;  // our own
  const char* ptr = static_cast<const char*>(devPtr);
  std::lock_guard<std::mutex> lock(g_peers_mutex);
  for (PeerMapping& mapping : g_mappings) {
    if (mapping.open_count > 0 && ptr >= mapping.base &&
        ptr < mapping.base + mapping.pages.size() * kDevicePageSize) {
      --mapping.open_count;  // kept mapped for reuse (see the top)
      return mydevSuccess;
    }
  }
  return fail(mydevErrorInvalidValue,
              "mydevIpcCloseMemHandle: %p was not opened with "
              "mydevIpcOpenMemHandle",
              devPtr);
}

}  // extern "C"
