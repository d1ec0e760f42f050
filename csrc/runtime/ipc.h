// Peer memory between processes (mydevIpc*): what the device properties
// need to know of it.
#pragma once

#include <cstddef>

namespace mydev_sim {

// Whether this process can map another process's device memory at all:
// MYDEV_PEER_MEMORY allows it and the OS lets a process take a file
// descriptor from another one (pidfd_getfd or /proc/<pid>/fd). A peer can
// still refuse (another user, exited): mydevIpcOpenMemHandle says so.
bool peer_memory_supported();

// The opened peer allocation containing `ptr` (a device address of this
// process's peer window), and the owner's device index.
bool find_peer_allocation(const void* ptr, int* device, char** base,
                          size_t* size);

}  // namespace mydev_sim
