#include "pointer_attributes.h"

#include "arena.h"
#include "device.h"
#include "error.h"
#include "host_memory.h"
#include "ipc.h"
#include "lifecycle.h"

namespace mydev_sim {

PointerInfo describe_pointer(const void* ptr) {
  PointerInfo info;
  if (Device* device = device_of_address(ptr)) {
    info.type = mydevMemoryTypeDevice;
    info.device = device->index();
    if (Arena* arena = device->existing_arena()) {
      arena->find(ptr, &info.base, &info.size);
    }
  } else if (find_host_allocation(ptr, &info.base, &info.size)) {
    info.type = mydevMemoryTypeHost;
  } else {
    describe_peer_pointer(ptr, &info);
  }
  return info;
}

}  // namespace mydev_sim

extern "C" mydevError_t mydevPointerGetAttributes(
    mydevPointerAttributes* attributes, const void* ptr) {
  using namespace mydev_sim;
  if (mydevError_t status = enter()) return status;
  if (attributes == nullptr) {
    return fail(mydevErrorInvalidValue,
                "mydevPointerGetAttributes: attributes is null");
  }
  const PointerInfo info = describe_pointer(ptr);
  attributes->type = info.type;
  attributes->device = info.device;
  attributes->basePointer = info.base;
  attributes->size = info.size;
  return mydevSuccess;
}
