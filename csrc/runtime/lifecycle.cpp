#include "lifecycle.h"

#include <pthread.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>

#include "device.h"
#include "error.h"

namespace mydev_sim {
namespace {

struct InitResult {
  Config config;
  mydevError_t status = mydevSuccess;
  std::string message;
};

// Written once under g_init_once and never freed: executors and late static
// destructors of the layers above may still read it while the process exits.
InitResult* g_init = nullptr;
std::once_flag g_init_once;
std::atomic<bool> g_initialized{false};
std::atomic<bool> g_activated{false};
std::atomic<bool> g_forked_child{false};
std::atomic<bool> g_shutting_down{false};

constexpr const char* kForkedChildMessage =
    "Cannot re-initialize mydev in forked subprocess: the parent had already "
    "used a mydev device before fork(). To use mydev with multiprocessing, "
    "use the 'spawn' start method";

// Runs in the child right after fork(). The parent's executor threads do not
// exist here and its mutexes may be held forever, so nothing may be touched
// but this flag.
void on_fork_child() {
  if (g_activated.load(std::memory_order_relaxed)) {
    g_forked_child.store(true, std::memory_order_relaxed);
  }
}

// Registered after the layers above were loaded, so it runs before their
// static destructors: kernels must not run while those tear down ATen.
void quiesce_at_exit() {
  if (g_forked_child.load(std::memory_order_relaxed)) return;
  g_shutting_down.store(true, std::memory_order_seq_cst);
  quiesce_devices_for_exit();
}

void initialize() {
  auto* init = new InitResult;
  init->status = read_config(&init->config, &init->message);
  if (init->status == mydevSuccess) {
    init->status = create_devices(init->config, &init->message);
  }
  g_init = init;
  if (init->status != mydevSuccess) return;
  pthread_atfork(nullptr, nullptr, on_fork_child);
  std::atexit(quiesce_at_exit);
  g_initialized.store(true, std::memory_order_release);
}

}  // namespace

mydevError_t enter() {
  if (g_forked_child.load(std::memory_order_relaxed)) {
    return fail(mydevErrorNotPermitted, "%s", kForkedChildMessage);
  }
  return enter_for_query();
}

mydevError_t enter_for_query() {
  if (!g_initialized.load(std::memory_order_acquire)) {
    std::call_once(g_init_once, initialize);
    if (g_init->status != mydevSuccess) {
      return fail_with(g_init->status, g_init->message);
    }
  }
  clear_last_error();
  return mydevSuccess;
}

const Config& config() { return g_init->config; }

void note_device_activated() {
  g_activated.store(true, std::memory_order_release);
}

bool shutting_down() { return g_shutting_down.load(std::memory_order_seq_cst); }

}  // namespace mydev_sim

extern "C" {

int mydevIsForkedChild(void) {
  return mydev_sim::g_forked_child.load(std::memory_order_relaxed) ? 1 : 0;
}

int mydevIsInitialized(void) {
  return mydev_sim::g_activated.load(std::memory_order_acquire) ? 1 : 0;
}

int mydevLaunchBlocking(void) {
  if (mydev_sim::enter() != mydevSuccess) return 0;
  return mydev_sim::config().launch_blocking ? 1 : 0;
}

}  // extern "C"
