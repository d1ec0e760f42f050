// The device address space: where device pointers live, and the kernel-side
// mapping through which the driver and kernels reach the same memory.
//
// One reservation of 2 * size bytes, made at initialisation:
//
//   device half [device_base, +size): a slot of device virtual addresses per
//       device, then a window where peer processes' memory is opened (IPC).
//       Never accessible: it is reserved PROT_NONE and stays so, which is
//       what makes a host dereference of a device pointer fault.
//   kernel half [kernel_base, +size): mirrors the device half page for page.
//       Wherever device memory is mapped at device address p, the same memfd
//       pages are mapped read-write at p + size. Only the driver (copies) and
//       kernels use it, through kernel_address().
//
// A third reservation, the null window, is where addresses outside the
// device half translate (a null or foreign pointer handed to a kernel): it is
// never mapped, so touching it is an illegal address, as on silicon.
//
// Any kernel-side access to an address that no device range maps faults;
// fault_handler.cpp turns that into an illegal-address error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "mydev_runtime.h"

namespace mydev_sim {

// Device memory is mapped in pages of this size (mydevMemGetGranularity).
constexpr size_t kDevicePageSize = size_t{64} << 10;

struct AddressSpace {
  char* device_base = nullptr;
  char* kernel_base = nullptr;  // device_base + size
  size_t size = 0;              // of each half
  size_t slot_size = 0;         // device addresses per device
  int device_count = 0;
  char* peer_base = nullptr;  // the IPC window, after the device slots
  size_t peer_size = 0;
  char* null_window = nullptr;
  size_t null_size = 0;  // a power of two
};

// Called once by the runtime's initialisation. Each device gets a slot of
// `slot_size` device addresses (a multiple of kDevicePageSize).
mydevError_t reserve_address_space(int device_count, size_t slot_size,
                                   std::string* error);

// nullptr before initialisation.
const AddressSpace* address_space();

// The kernel-side address of `ptr` (see mydevKernelPointer). `space` must be
// the initialised address space.
inline void* kernel_address(const AddressSpace& space, const void* ptr) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(ptr);
  const uintptr_t offset =
      address - reinterpret_cast<uintptr_t>(space.device_base);
  if (offset < space.size) return space.kernel_base + offset;
  return space.null_window + (address & (space.null_size - 1));
}

// The address the driver's copy engine uses for one side of a copy: device
// addresses (IPC-opened ones too) translate, host memory is itself.
inline void* copy_address(const AddressSpace& space, const void* ptr) {
  const size_t offset =
      size_t(static_cast<const char*>(ptr) - space.device_base);
  return offset < space.size ? space.kernel_base + offset
                             : const_cast<void*>(ptr);
}

// Whether `ptr` is a kernel-side address of device memory.
inline bool is_kernel_address(const AddressSpace& space, const void* ptr) {
  return static_cast<size_t>(static_cast<const char*>(ptr) -
                             space.kernel_base) < space.size;
}

// Maps `length` bytes of `fd` from `file_offset` read-write at kernel-side
// address `at` (page aligned, inside the kernel half). False with errno set.
bool map_kernel_pages(char* at, size_t length, int fd, size_t file_offset);
// Returns [at, at + length) of the kernel half to the inaccessible
// reservation.
void unmap_kernel_pages(char* at, size_t length);

}  // namespace mydev_sim
