// The device-memory entry points; the allocator itself is arena.cpp.
#include "arena.h"
#include "device.h"
#include "error.h"
#include "lifecycle.h"

using namespace mydev_sim;

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
  Arena* arena = nullptr;
  if (mydevError_t status = dev->arena(&arena)) return status;
  return arena->allocate(size, ptr);
}

mydevError_t mydevFree(void* ptr) {
  if (mydevError_t status = enter()) return status;
  if (ptr == nullptr) return mydevSuccess;
  Device* device = device_of_address(ptr);
  Arena* arena = device != nullptr ? device->existing_arena() : nullptr;
  if (arena == nullptr) {
    return fail(mydevErrorInvalidValue,
                "mydevFree: %p is not device memory from mydevMalloc", ptr);
  }
  return arena->release(ptr);
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
  const Arena* arena = dev->existing_arena();
  *total_bytes = dev->capacity();
  *free_bytes = dev->capacity() - (arena ? arena->allocated_bytes() : 0);
  return mydevSuccess;
}

}  // extern "C"
