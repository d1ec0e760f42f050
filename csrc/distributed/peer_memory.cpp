#include "peer_memory.h"

#include <c10/util/Exception.h>

#include "collective_checks.h"

namespace mydev::distributed {

PeerMemory::~PeerMemory() {
  closeOpened();
  for (void* anchor : anchors_) {
    if (anchor != nullptr) {
      (void)mydevIpcCloseMemHandle(anchor);
    }
  }
}

PeerBuffer PeerMemory::publish(const void* ptr) {
  PeerBuffer buffer{};
  mydevPointerAttributes attributes{};
  mydevError_t status = mydevPointerGetAttributes(&attributes, ptr);
  if (status == mydevSuccess) {
    status = mydevIpcGetMemHandle(&buffer.handle, const_cast<void*>(ptr));
  }
  TORCH_CHECK(status == mydevSuccess && attributes.basePointer != nullptr,
              "myccl: cannot share a device buffer with the peers: ",
              mydevGetLastErrorMessage());
  buffer.published = 1;
  buffer.offset =
      static_cast<uint64_t>(static_cast<const char*>(ptr) -
                            static_cast<const char*>(attributes.basePointer));
  return buffer;
}

char* PeerMemory::open(int peer, const PeerBuffer& buffer, std::string* why) {
  void* base = nullptr;
  if (mydevIpcOpenMemHandle(&base, buffer.handle) != mydevSuccess) {
    *why = mydevGetLastErrorMessage();
    return nullptr;
  }
  if (anchors_[static_cast<size_t>(peer)] == nullptr) {
    anchors_[static_cast<size_t>(peer)] = base;
  } else {
    opened_.push_back(base);
  }
  // Kernel-side: the algorithms use it inside their kernels only.
  return static_cast<char*>(mydevKernelPointer(base)) + buffer.offset;
}

char* PeerMemory::openOrThrow(int peer, const PeerBuffer& buffer) {
  std::string why;
  char* ptr = open(peer, buffer, &why);
  if (ptr == nullptr) {
    throwDistError(c10::str("myccl: cannot open the device buffer of rank ",
                            peer, ": ", why));
  }
  return ptr;
}

void PeerMemory::closeOpened() {
  for (void* ptr : opened_) {
    (void)mydevIpcCloseMemHandle(ptr);
  }
  opened_.clear();
}

}  // namespace mydev::distributed
