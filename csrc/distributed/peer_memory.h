// The peers' device buffers, opened through the driver's IPC handles
// (mydevIpc* in mydev_runtime.h), for the algorithms that read and write
// peer memory directly. Used by one communication stream's kernels only.
#pragma once

#include <string>
#include <vector>

#include "collective_descriptor.h"

namespace mydev::distributed {

class PeerMemory {
 public:
  explicit PeerMemory(int size)
      : anchors_(static_cast<size_t>(size), nullptr) {}
  ~PeerMemory();
  PeerMemory(const PeerMemory&) = delete;
  PeerMemory& operator=(const PeerMemory&) = delete;

  // This rank's device buffer at `ptr` as peers can open it.
  static PeerBuffer publish(const void* ptr);

  // The kernel-side address (mydevKernelPointer) of `peer`'s buffer mapped
  // here, or nullptr and the reason in `why`. Valid until closeOpened().
  char* open(int peer, const PeerBuffer& buffer, std::string* why);
  // Like open(), but throws if the buffer cannot be mapped.
  char* openOrThrow(int peer, const PeerBuffer& buffer);
  void closeOpened();

 private:
  // Per peer, the first pointer opened stays open as long as the group, so
  // that the driver keeps the peer's mapping (and its page tables) between
  // collectives.
  std::vector<void*> anchors_;
  std::vector<void*> opened_;
};

}  // namespace mydev::distributed
