// The device-memory entry points; the memory itself is device_memory.cpp.
#include "address_space.h"
#include "device.h"
#include "device_memory.h"
#include "error.h"
#include "lifecycle.h"

using namespace mydev_sim;

namespace {

// The memory of the device whose address slot holds `ptr`, or an error
// naming `api`.
mydevError_t memory_of(const char* api, const void* ptr, DeviceMemory** out) {
  Device* device = device_of_address(ptr);
  *out = device != nullptr ? device->existing_memory() : nullptr;
  if (*out == nullptr) {
    return fail(mydevErrorInvalidValue, "%s: %p is not mydev device memory",
                api, ptr);
  }
  return mydevSuccess;
}

mydevError_t check_granular(const char* api, const void* ptr, size_t size) {
  if (size == 0 || size % kDevicePageSize != 0 ||
      reinterpret_cast<uintptr_t>(ptr) % kDevicePageSize != 0) {
    return fail(mydevErrorInvalidValue,
                "%s: address %p and size %zu must be non-zero multiples of "
                "the granularity, %zu bytes (mydevMemGetGranularity)",
                api, ptr, size, kDevicePageSize);
  }
  return mydevSuccess;
}

}  // namespace

extern "C" {

mydevError_t mydevMalloc(void** ptr, size_t size, int device) {
  if (mydevError_t status = enter()) return status;
  if (ptr == nullptr) {
    return fail(mydevErrorInvalidValue, "mydevMalloc: ptr is null");
  }
  Device* dev = nullptr;
  if (mydevError_t status = get_device(device, &dev)) return status;
  if (size == 0) {
    *ptr = nullptr;
    return mydevSuccess;
  }
  DeviceMemory* memory = nullptr;
  if (mydevError_t status = dev->memory(&memory)) return status;
  return memory->allocate(size, ptr);
}

mydevError_t mydevFree(void* ptr) {
  if (mydevError_t status = enter()) return status;
  if (ptr == nullptr) return mydevSuccess;
  DeviceMemory* memory = nullptr;
  if (mydevError_t status = memory_of("mydevFree", ptr, &memory)) {
    return status;
  }
  return memory->release(ptr);
}

mydevError_t mydevMemGetInfo(int device, size_t* free_bytes,
                             size_t* total_bytes) {
  if (mydevError_t status = enter()) return status;
  if (free_bytes == nullptr || total_bytes == nullptr) {
    return fail(mydevErrorInvalidValue,
                "mydevMemGetInfo: free_bytes and total_bytes must not be null");
  }
  Device* dev = nullptr;
  if (mydevError_t status = get_device(device, &dev)) return status;
  const DeviceMemory* memory = dev->existing_memory();
  *total_bytes = dev->capacity();
  *free_bytes = dev->capacity() - (memory ? memory->used_bytes() : 0);
  return mydevSuccess;
}

mydevError_t mydevMemGetGranularity(size_t* granularity) {
  if (mydevError_t status = enter()) return status;
  if (granularity == nullptr) {
    return fail(mydevErrorInvalidValue,
                "mydevMemGetGranularity: granularity is null");
  }
  *granularity = kDevicePageSize;
  return mydevSuccess;
}

mydevError_t mydevMemAddressReserve(void** ptr, size_t size, int device) {
  if (mydevError_t status = enter()) return status;
  if (ptr == nullptr) {
    return fail(mydevErrorInvalidValue, "mydevMemAddressReserve: ptr is null");
  }
  if (mydevError_t status =
          check_granular("mydevMemAddressReserve", nullptr, size)) {
    return status;
  }
  Device* dev = nullptr;
  if (mydevError_t status = get_device(device, &dev)) return status;
  DeviceMemory* memory = nullptr;
  if (mydevError_t status = dev->memory(&memory)) return status;
  return memory->reserve(size, ptr);
}

mydevError_t mydevMemAddressFree(void* ptr, size_t size) {
  if (mydevError_t status = enter()) return status;
  DeviceMemory* memory = nullptr;
  if (mydevError_t status = memory_of("mydevMemAddressFree", ptr, &memory)) {
    return status;
  }
  return memory->free_reservation(ptr, size);
}

mydevError_t mydevMemMap(void* ptr, size_t size) {
  if (mydevError_t status = enter()) return status;
  if (mydevError_t status = check_granular("mydevMemMap", ptr, size)) {
    return status;
  }
  DeviceMemory* memory = nullptr;
  if (mydevError_t status = memory_of("mydevMemMap", ptr, &memory)) {
    return status;
  }
  return memory->map(ptr, size);
}

mydevError_t mydevMemUnmap(void* ptr, size_t size) {
  if (mydevError_t status = enter()) return status;
  if (mydevError_t status = check_granular("mydevMemUnmap", ptr, size)) {
    return status;
  }
  DeviceMemory* memory = nullptr;
  if (mydevError_t status = memory_of("mydevMemUnmap", ptr, &memory)) {
    return status;
  }
  return memory->unmap(ptr, size);
}

}  // extern "C"
