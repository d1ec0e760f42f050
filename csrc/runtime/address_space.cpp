#include "address_space.h"

#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "align.h"
#include "error.h"
#include "fault_handler.h"

namespace mydev_sim {
namespace {

// Peer windows of this many device slots: a rank opens buffers of every
// peer, each up to a device's capacity.
constexpr size_t kPeerWindowSlots = 8;
// Where non-device addresses translate; wider than any offset a kernel adds
// to a null pointer in practice.
constexpr size_t kNullWindowSize = size_t{1} << 36;

constexpr int kReservedFlags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;

// Never freed: executors may still translate while the process exits.
std::atomic<const AddressSpace*> g_space{nullptr};

char* reserve(size_t size) {
  void* base = mmap(nullptr, size, PROT_NONE, kReservedFlags, -1, 0);
  return base == MAP_FAILED ? nullptr : static_cast<char*>(base);
}

}  // namespace

mydevError_t reserve_address_space(int device_count, size_t slot_size,
                                   std::string* error) {
  auto* space = new AddressSpace;
  space->slot_size = slot_size;
  space->device_count = device_count;
  space->peer_size = slot_size * kPeerWindowSlots;
  space->size = slot_size * size_t(device_count) + space->peer_size;
  space->null_size = kNullWindowSize;
  // Address space only: PROT_NONE and MAP_NORESERVE commit no memory.
  char* base = reserve(2 * space->size);
  char* null_window = base != nullptr ? reserve(kNullWindowSize) : nullptr;
  if (null_window == nullptr) {
    *error = format(
        "cannot reserve %zu bytes of address space for %d mydev "
        "devices (MYDEV_DEVICE_COUNT, MYDEV_MEMORY_MB): %s",
        2 * space->size + kNullWindowSize, device_count, std::strerror(errno));
    if (base != nullptr) munmap(base, 2 * space->size);
    delete space;
    return mydevErrorInitialization;
  }
  space->device_base = base;
  space->kernel_base = base + space->size;
  space->peer_base = base + slot_size * size_t(device_count);
  space->null_window = null_window;
  g_space.store(space, std::memory_order_release);
  install_fault_handler();
  return mydevSuccess;
}

const AddressSpace* address_space() {
  return g_space.load(std::memory_order_acquire);
}

bool map_kernel_pages(char* at, size_t length, int fd, size_t file_offset) {
  return mmap(at, length, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
              off_t(file_offset)) != MAP_FAILED;
}

void unmap_kernel_pages(char* at, size_t length) {
  // Replacing the mapping (not munmap) keeps the range reserved, so no other
  // mmap of the process can land inside the device address space.
  (void)mmap(at, length, PROT_NONE, kReservedFlags | MAP_FIXED, -1, 0);
}

}  // namespace mydev_sim

extern "C" void* mydevKernelPointer(const void* devPtr) {
  using namespace mydev_sim;
  const AddressSpace* space = address_space();
  if (space == nullptr) {
    // No device memory exists before initialisation; initialise so that the
    // address returned is the null window's, as it will be afterwards.
    int count = 0;
    (void)mydevGetDeviceCount(&count);
    space = address_space();
    if (space == nullptr) return const_cast<void*>(devPtr);
  }
  return kernel_address(*space, devPtr);
}
