// Peer memory between processes (mydevIpc*): what the device properties
// need to know of it.
#pragma once

#include "pointer_attributes.h"

namespace mydev_sim {

// Whether this process can map another process's device memory at all:
// MYDEV_PEER_MEMORY allows it and the OS lets a process take a file
// descriptor from another one (pidfd_getfd or /proc/<pid>/fd). A peer can
// still refuse (another user, exited): mydevIpcOpenMemHandle says so.
bool peer_memory_supported();

// Describes `ptr` if it lies in a peer device's memory opened here: device
// memory of that device index (copies and pointer attributes treat it as
// such), with the peer's whole mapped memory as its extent.
bool describe_peer_pointer(const void* ptr, PointerInfo* info);

}  // namespace mydev_sim
