// Peer memory (mydevIpc*). A handle names an allocation by its owner's pid,
// the owner's arena memfd (descriptor number, plus the file's device and
// inode so that a recycled pid or descriptor is detected) and the
// allocation's offset and size. Opening it takes a duplicate of the owner's
// memfd (pidfd_getfd, or /proc/<pid>/fd/<n> where that is refused) and maps
// the peer's whole arena once; every allocation of that peer device is then
// an offset into the one mapping, so a collective that opens handles every
// call costs a map lookup, not an mmap and a page-table refill.
#include "ipc.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "arena.h"
#include "device.h"
#include "error.h"
#include "lifecycle.h"

namespace mydev_sim {
namespace {

constexpr uint32_t kHandleMagic = 0x4d594950;  // "MYIP"

struct HandleData {
  uint32_t magic;
  int32_t owner_pid;
  int32_t device;
  int32_t arena_fd;
  uint64_t file_device;  // st_dev and st_ino of the arena's memfd
  uint64_t file_inode;
  uint64_t capacity;
  uint64_t offset;  // of the allocation in the arena
  uint64_t size;
};
static_assert(sizeof(HandleData) <= MYDEV_IPC_HANDLE_SIZE,
              "the handle data must fit mydevIpcMemHandle_t");

// (owner pid, st_dev, st_ino): one peer device's arena.
using PeerKey = std::tuple<int, uint64_t, uint64_t>;

struct PeerMapping {
  char* base;
  size_t capacity;
  size_t open_count;
  int device;  // the peer's device index
};

std::mutex g_peers_mutex;
// Mappings still open at exit go with the process.
std::map<PeerKey, PeerMapping> g_peers;

// A descriptor of the owner's arena memfd, or -1 and the reasons in `why`.
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
  Arena* arena = device->existing_arena();
  if (arena == nullptr || arena->fd() != data.arena_fd ||
      arena->capacity() != data.capacity) {
    return fail(mydevErrorInvalidValue,
                "mydevIpcOpenMemHandle: the handle names mydev:%d memory of "
                "this process that does not exist",
                data.device);
  }
  *ptr = arena->base() + data.offset;
  return mydevSuccess;
}

mydevError_t open_peer(const HandleData& data, void** ptr) {
  const PeerKey key{data.owner_pid, data.file_device, data.file_inode};
  std::lock_guard<std::mutex> lock(g_peers_mutex);
  auto found = g_peers.find(key);
  if (found == g_peers.end()) {
    std::string why;
    const int fd = take_peer_fd(data.owner_pid, data.arena_fd, &why);
    if (fd < 0) return refuse(data, why);
    struct stat st {};
    if (fstat(fd, &st) != 0 || uint64_t(st.st_dev) != data.file_device ||
        uint64_t(st.st_ino) != data.file_inode) {
      close(fd);
      return refuse(data, "the process no longer has that device memory "
                          "(it exited, or its pid was reused)");
    }
    void* base = mmap(nullptr, data.capacity, PROT_READ | PROT_WRITE,
                      MAP_SHARED, fd, 0);
    const int err = errno;
    close(fd);  // the mapping keeps the memory alive
    if (base == MAP_FAILED) {
      return refuse(data, format("mmap of %llu bytes: %s",
                                 (unsigned long long)data.capacity,
                                 std::strerror(err)));
    }
    found = g_peers
                .emplace(key, PeerMapping{static_cast<char*>(base),
                                          size_t(data.capacity), 0,
                                          data.device})
                .first;
  }
  ++found->second.open_count;
  *ptr = found->second.base + data.offset;
  return mydevSuccess;
}

}  // namespace

bool describe_peer_pointer(const void* ptr, PointerInfo* info) {
  const char* address = static_cast<const char*>(ptr);
  std::lock_guard<std::mutex> lock(g_peers_mutex);
  for (const auto& entry : g_peers) {
    const PeerMapping& mapping = entry.second;
    if (address >= mapping.base && address < mapping.base + mapping.capacity) {
      info->type = mydevMemoryTypeDevice;
      info->device = mapping.device;
      info->base = mapping.base;
      info->size = mapping.capacity;
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
  Arena* arena = device != nullptr ? device->existing_arena() : nullptr;
  char* base = nullptr;
  size_t size = 0;
  if (arena == nullptr || !arena->find(devPtr, &base, &size)) {
    return fail(mydevErrorInvalidValue,
                "mydevIpcGetMemHandle: %p is not in a live device allocation",
                devPtr);
  }
  struct stat st {};
  if (fstat(arena->fd(), &st) != 0) {
    return fail(mydevErrorInvalidValue, "mydevIpcGetMemHandle: fstat: %s",
                std::strerror(errno));
  }
  HandleData data{};
  data.magic = kHandleMagic;
  data.owner_pid = int32_t(getpid());
  data.device = device->index();
  data.arena_fd = arena->fd();
  data.file_device = uint64_t(st.st_dev);
  data.file_inode = uint64_t(st.st_ino);
  data.capacity = arena->capacity();
  data.offset = uint64_t(base - arena->base());
  data.size = size;
  *handle = mydevIpcMemHandle_t{};
  std::memcpy(handle->reserved, &data, sizeof(data));
  return mydevSuccess;
}

mydevError_t mydevIpcOpenMemHandle(void** devPtr, mydevIpcMemHandle_t handle) {
  if (mydevError_t status = enter()) return status;
  if (devPtr == nullptr) {
    return fail(mydevErrorInvalidValue, "mydevIpcOpenMemHandle: devPtr is null");
  }
  HandleData data;
  std::memcpy(&data, handle.reserved, sizeof(data));
  if (data.magic != kHandleMagic || data.offset > data.capacity ||
      data.size > data.capacity - data.offset) {
    return fail(mydevErrorInvalidValue,
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
  for (auto it = g_peers.begin(); it != g_peers.end(); ++it) {
    PeerMapping& mapping = it->second;
    if (ptr >= mapping.base && ptr < mapping.base + mapping.capacity) {
      if (--mapping.open_count == 0) {
        munmap(mapping.base, mapping.capacity);
        g_peers.erase(it);
      }
      return mydevSuccess;
    }
  }
  return fail(mydevErrorInvalidValue,
              "mydevIpcCloseMemHandle: %p was not opened with "
              "mydevIpcOpenMemHandle",
              devPtr);
}

}  // extern "C"
