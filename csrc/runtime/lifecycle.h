// Process-level state of the runtime: one-time initialisation, refusal in a
// forked child, and quiescing at process exit.
#pragma once

#include "config.h"
#include "mydev_runtime.h"

namespace mydev_sim {

// The first statement of every API entry: initialises the runtime on first
// use, refuses a forked child, and clears the thread's last-error message.
mydevError_t enter();

// enter() for calls that only read the configuration (device count and
// properties): allowed in a forked child too, as CUDA answers them there,
// because they touch no thread, lock or memory shared with the parent.
mydevError_t enter_for_query();

// Valid once enter() has succeeded.
const Config& config();

// Called when a device gets state that cannot survive fork(): an executor
// thread or shared device memory. From then on a forked child is refused;
// before it (only configuration read, device counts and properties asked) a
// child may use the runtime as a fresh process would.
void note_device_activated();

// True once exit() has started: executors stop taking work and waits return,
// so that nothing runs under static destructors and nothing can hang exit.
bool shutting_down();

}  // namespace mydev_sim
