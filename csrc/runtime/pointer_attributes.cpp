#include "pointer_attributes.h"

#include "device.h"
#include "device_memory.h"
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
    if (DeviceMemory* memory = device->existing_memory()) {
      memory->find(ptr, &info.base, &info.size);
    }
  } else if (find_peer_allocation(ptr, &info.device, &info.base, &info.size)) {
    info.type = mydevMemoryTypeDevice;
  } else if (find_host_allocation(ptr, &info.base, &info.size)) {
    info.type = mydevMemoryTypeHost;
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
