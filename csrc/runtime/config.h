// The MYDEV_* environment configuration, read once at the first API call.
#pragma once

#include <cstddef>
#include <string>

#include "mydev_runtime.h"

namespace mydev_sim {

struct Config {
  int device_count = 2;
  size_t memory_bytes = 0;  // capacity of each device's memory
  bool launch_blocking = false;
  bool peer_memory = true;  // MYDEV_PEER_MEMORY
  // MYDEV_DYNAMIC_THREADS: kernels' OpenMP teams shrink to the cores other
  // processes leave free (host_threads.h).
  bool dynamic_threads = true;
};

// On a malformed variable returns mydevErrorInitialization and a message
// naming the variable and its value.
mydevError_t read_config(Config* config, std::string* error);

}  // namespace mydev_sim
