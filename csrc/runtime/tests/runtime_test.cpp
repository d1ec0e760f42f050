// Tests of the simulated mydev driver (csrc/runtime), without torch.
//
//   g++ -O2 -std=c++17 -pthread csrc/runtime/*.cpp
//       csrc/runtime/tests/runtime_test.cpp -o /tmp/rt_test && /tmp/rt_test
//
// Configuration is read once per process, so the cases that need another
// configuration (launch blocking, a bad variable, the defaults, exit with
// work queued) re-run this binary with a mode argument and other variables.
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "../host_threads.h"
#include "../mydev_runtime.h"
#include "check.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start)
      .count();
}

void sleep_ms(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

// A kernel running an arbitrary closure; the kernel owns the closure.
using Body = std::function<void()>;

void run_body(void* data) {
  std::unique_ptr<Body> body(static_cast<Body*>(data));
  (*body)();
}

mydevError_t launch(mydevStream_t stream, const char* name, Body body) {
  auto* owned = new Body(std::move(body));
  const mydevError_t status = mydevLaunchKernel(stream, name, run_body, owned);
  // On LaunchFailure (launch blocking) the kernel ran and freed it.
  if (status != mydevSuccess && status != mydevErrorLaunchFailure) {
    delete owned;
  }
  return status;
}

void empty_kernel(void*) {}

mydevStream_t default_stream(int device) {
  mydevStream_t stream = nullptr;
  mydevStreamGetDefault(device, &stream);
  return stream;
}

// Runs `body` on a thread and fails (instead of hanging) after `seconds`.
void within(int seconds, const char* what, const std::function<void()>& body) {
  auto done = std::async(std::launch::async, body);
  if (done.wait_for(std::chrono::seconds(seconds)) !=
      std::future_status::ready) {
    std::fprintf(stderr, "FAIL: %s did not finish within %d s (deadlock?)\n",
                 what, seconds);
    std::_Exit(2);
  }
  done.get();
}

// ------------------------------------------------------------ child modes --

// The child's exit code, or 128 + the signal that killed it. Its stderr
// goes to `stderr_path` if given.
int run_child(const std::string& mode, const std::vector<std::string>& env,
              double* elapsed_ms = nullptr, const char* stderr_path = nullptr) {
  std::vector<std::string> storage;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "MYDEV_", 6) != 0) storage.emplace_back(*e);
  }
  storage.insert(storage.end(), env.begin(), env.end());
  std::vector<char*> envp;
  for (std::string& s : storage) envp.push_back(&s[0]);
  envp.push_back(nullptr);
  std::string self = "/proc/self/exe";
  std::string mode_arg = mode;
  char* argv[] = {&self[0], &mode_arg[0], nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (stderr_path != nullptr) {
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderr_path,
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
  }
  const auto start = Clock::now();
  pid_t pid = 0;
  const int spawned =
      posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return -1;
  int status = 0;
  waitpid(pid, &status, 0);
  if (elapsed_ms != nullptr) *elapsed_ms = ms_since(start);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int child_launch_blocking() {
  CHECK(mydevLaunchBlocking() == 1);
  mydevStream_t stream = default_stream(0);
  std::atomic<int> flag{0};
  const auto start = Clock::now();
  CHECK_OK(launch(stream, "slow", [&] {
    sleep_ms(50);
    flag = 1;
  }));
  CHECK(flag == 1);
  CHECK(ms_since(start) >= 45);
  CHECK_STATUS(launch(stream, "thrower",
                      [] { throw std::runtime_error("blocking boom"); }),
               mydevErrorLaunchFailure);
  CHECK(last_message_has("kernel 'thrower' failed on mydev:0: blocking boom"));
  CHECK_OK(mydevStreamSynchronize(stream));

  // A pinned async copy completes before the call returns too.
  void* host = nullptr;
  void* device = nullptr;
  CHECK_OK(mydevHostAlloc(&host, 4096));
  CHECK_OK(mydevMalloc(&device, 4096, 0));
  CHECK_OK(launch(stream, "slow", [] { sleep_ms(30); }));
  std::memset(host, 7, 4096);
  CHECK_OK(
      mydevMemcpyAsync(device, host, 4096, mydevMemcpyHostToDevice, stream));
  CHECK(mydevStreamQuery(stream) == mydevSuccess);
  CHECK_OK(mydevFree(device));
  CHECK_OK(mydevHostFree(host));
  return g_failed;
}

int child_bad_config() {
  int count = -1;
  CHECK_STATUS(mydevGetDeviceCount(&count), mydevErrorInitialization);
  CHECK(last_message_has("MYDEV_DEVICE_COUNT"));
  CHECK(last_message_has(std::getenv("MYDEV_DEVICE_COUNT")));
  void* ptr = nullptr;
  CHECK_STATUS(mydevMalloc(&ptr, 16, 0), mydevErrorInitialization);
  CHECK(mydevIsInitialized() == 0);
  return g_failed;
}

int child_defaults() {
  int count = 0;
  CHECK_OK(mydevGetDeviceCount(&count));
  CHECK(count == 2);
  CHECK(mydevLaunchBlocking() == 0);
  size_t free_bytes = 0;
  size_t total = 0;
  CHECK_OK(mydevMemGetInfo(0, &free_bytes, &total));
  const size_t ram =
      size_t(sysconf(_SC_PHYS_PAGES)) * size_t(sysconf(_SC_PAGE_SIZE));
  const size_t expected = std::max<size_t>(ram / 4 / 2 >> 20, 256) << 20;
  CHECK(total == expected);
  CHECK(free_bytes == total);
  return g_failed;
}

int child_zero_devices() {
  int count = -1;
  CHECK_OK(mydevGetDeviceCount(&count));
  CHECK(count == 0);
  void* ptr = nullptr;
  CHECK_STATUS(mydevMalloc(&ptr, 16, 0), mydevErrorInvalidDevice);
  return g_failed;
}

// Returns from main with plenty of work queued and one kernel running: the
// process must exit promptly and cleanly.
int child_exit_with_work() {
  mydevStream_t streams[2];
  CHECK_OK(mydevStreamCreate(&streams[0], 0, 0));
  CHECK_OK(mydevStreamCreate(&streams[1], 1, -1));
  for (mydevStream_t stream : streams) {
    for (int i = 0; i < 200; ++i) {
      launch(stream, "sleepy", [] { sleep_ms(20); });
    }
  }
  mydevEvent_t event = nullptr;
  mydevEventCreate(&event, mydevEventDefault);
  mydevEventRecord(event, streams[0]);
  mydevStreamWaitEvent(default_stream(0), event);
  mydevEventDestroy(event);
  void* device = nullptr;
  mydevMalloc(&device, 64 << 20, 0);
  mydevMemsetAsync(device, 1, 64 << 20, default_stream(0));
  sleep_ms(30);
  return g_failed;
}

// Forked before any device was put to use: the child may use the runtime,
// even though the parent already read its configuration and properties.
int child_fork_before_init() {
  int count = 0;
  CHECK_OK(mydevGetDeviceCount(&count));
  mydevDeviceProp prop{};
  CHECK_OK(mydevGetDeviceProperties(&prop, 0));
  CHECK(mydevIsInitialized() == 0);
  const pid_t pid = fork();
  if (pid == 0) {
    std::atomic<int> ran{0};
    int ok = mydevIsForkedChild() == 0;
    ok &= launch(default_stream(0), "k", [&] { ran = 1; }) == mydevSuccess;
    ok &= mydevDeviceSynchronize(0) == mydevSuccess;
    ok &= ran == 1;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK_OK(mydevDeviceSynchronize(0));
  return g_failed;
}

// Maps the parent's device buffer from the handle in IPC_TEST_HANDLE (hex)
// and checks, in a kernel, the pattern the parent wrote (byte i == i % 251).
int child_ipc() {
  const char* hex = std::getenv("IPC_TEST_HANDLE");
  const char* expect_refusal = std::getenv("IPC_TEST_EXPECT_REFUSAL");
  mydevIpcMemHandle_t handle{};
  for (int i = 0; hex != nullptr && i < MYDEV_IPC_HANDLE_SIZE; ++i) {
    unsigned byte = 0;
    std::sscanf(hex + 2 * i, "%2x", &byte);
    handle.reserved[i] = static_cast<char>(byte);
  }
  void* ptr = nullptr;
  if (expect_refusal != nullptr) {
    mydevDeviceProp prop{};
    CHECK_OK(mydevGetDeviceProperties(&prop, 0));
    CHECK(prop.canMapPeerMemory == 0);
    CHECK_STATUS(mydevIpcOpenMemHandle(&ptr, handle),
                 mydevErrorPeerAccessUnsupported);
    CHECK(last_message_has("cannot map peer memory"));
    return g_failed;
  }
  CHECK_OK(mydevIpcOpenMemHandle(&ptr, handle));
  void* again = nullptr;
  CHECK_OK(mydevIpcOpenMemHandle(&again, handle));
  CHECK(again == ptr);  // the mapping is reused
  mydevPointerAttributes attr{};
  CHECK_OK(mydevPointerGetAttributes(&attr, ptr));
  CHECK(attr.type == mydevMemoryTypeDevice && attr.basePointer == ptr);
  // The host reads peer memory through a copy, like any device memory.
  unsigned char copied[4096];
  CHECK_OK(mydevMemcpy(copied, ptr, sizeof copied, mydevMemcpyDeviceToHost,
                       default_stream(0)));
  CHECK(copied[250] == 250 && copied[251] == 0);
  std::atomic<bool> matches{false};
  CHECK_OK(launch(default_stream(0), "read peer", [&] {
    const auto* bytes =
        static_cast<const unsigned char*>(mydevKernelPointer(ptr));
    bool ok = true;
    for (int i = 0; i < 4096; ++i) ok &= bytes[i] == i % 251;
    matches = ok;
  }));
  CHECK_OK(mydevDeviceSynchronize(0));
  CHECK(matches);
  CHECK_OK(mydevIpcCloseMemHandle(again));
  CHECK_OK(mydevIpcCloseMemHandle(ptr));
  CHECK_STATUS(mydevIpcCloseMemHandle(ptr), mydevErrorInvalidValue);
  // Opened again after closing: the kept mapping.
  void* reopened = nullptr;
  CHECK_OK(mydevIpcOpenMemHandle(&reopened, handle));
  CHECK(reopened == ptr);
  CHECK_OK(mydevIpcCloseMemHandle(reopened));
  return g_failed;
}

// Dereferences a device pointer of mydev:1 on the host: the process must die
// of the fault, after a message naming the pointer.
int child_host_dereference() {
  void* device = nullptr;
  CHECK_OK(mydevMalloc(&device, 1 << 20, 1));
  volatile char* bytes = static_cast<volatile char*>(device) + 4096;
  std::fprintf(stderr, "pointer %p\n",
               static_cast<void*>(const_cast<char*>(bytes)));
  std::fflush(stderr);
  if (std::getenv("DEREFERENCE_WRITE") != nullptr) {
    bytes[0] = 1;
  } else {
    std::fprintf(stderr, "read %d\n", int(bytes[0]));
  }
  return 3;  // not reached
}

// Kernels touching memory that nothing maps: a freed allocation on mydev:0,
// an offset from a null pointer on mydev:1. Each device fails with a sticky
// illegal-address error naming the kernel and the address.
int child_illegal_address() {
  void* freed = nullptr;
  CHECK_OK(mydevMalloc(&freed, 1 << 20, 0));
  CHECK_OK(mydevFree(freed));
  std::atomic<int> finished{0};
  CHECK_OK(launch(default_stream(0), "read_freed", [&] {
    volatile const char* bytes =
        static_cast<const char*>(mydevKernelPointer(freed));
    (void)bytes[100];
    finished = 1;  // the access completes, on a scratch page
  }));
  CHECK_STATUS(mydevDeviceSynchronize(0), mydevErrorIllegalAddress);
  CHECK(finished == 1);
  CHECK(
      last_message_has("an illegal memory access was encountered: kernel "
                       "'read_freed' on mydev:0 touched device address"));
  char expected[64];
  std::snprintf(expected, sizeof expected, "%p",
                static_cast<void*>(static_cast<char*>(freed) + 100));
  CHECK(last_message_has(expected));
  // Sticky: every later synchronizing call reports it again.
  CHECK_STATUS(mydevStreamSynchronize(default_stream(0)),
               mydevErrorIllegalAddress);
  CHECK(last_message_has("read_freed"));

  CHECK_OK(launch(default_stream(1), "write_near_null", [] {
    auto* bytes = static_cast<char*>(mydevKernelPointer(nullptr));
    bytes[0x40] = 1;
  }));
  CHECK_STATUS(mydevDeviceSynchronize(1), mydevErrorIllegalAddress);
  CHECK(
      last_message_has("kernel 'write_near_null' on mydev:1 touched "
                       "address 0x40, which is not a device address"));
  return g_failed;
}

// ------------------------------------------------------------------ tests --

// Device pointers live in an address range of their own that the host cannot
// touch; kernels reach the memory at the translated address.
void test_address_space() {
  void* a = nullptr;
  void* b = nullptr;
  CHECK_OK(mydevMalloc(&a, 1 << 20, 0));
  CHECK_OK(mydevMalloc(&b, 1 << 20, 1));
  char* ka = static_cast<char*>(mydevKernelPointer(a));
  CHECK(ka != a);
  CHECK(mydevKernelPointer(static_cast<char*>(a) + 12345) == ka + 12345);
  CHECK(mydevKernelPointer(b) != mydevKernelPointer(a));
  // Host pointers have no kernel-side memory.
  int local = 0;
  CHECK(mydevKernelPointer(&local) != &local);
  CHECK_OK(launch(default_stream(0), "write",
                  [=] { std::memset(mydevKernelPointer(a), 0x42, 1 << 20); }));
  std::vector<unsigned char> back(1 << 20);
  CHECK_OK(mydevMemcpy(back.data(), a, back.size(), mydevMemcpyDeviceToHost,
                       default_stream(0)));
  CHECK(std::all_of(back.begin(), back.end(),
                    [](unsigned char x) { return x == 0x42; }));
  CHECK_OK(mydevFree(a));
  CHECK_OK(mydevFree(b));

  const char* log = "/tmp/mydev_runtime_test_dereference.log";
  for (const char* write : {"", "DEREFERENCE_WRITE=1"}) {
    std::vector<std::string> env;
    if (*write != '\0') env.push_back(write);
    CHECK(run_child("--child-host-dereference", env, nullptr, log) ==
          128 + SIGSEGV);
    std::string text;
    if (FILE* file = std::fopen(log, "r")) {
      char line[1024];
      while (std::fgets(line, sizeof line, file)) text += line;
      std::fclose(file);
    }
    CHECK(text.find("mydev: host code dereferenced device pointer 0x") !=
          std::string::npos);
    CHECK(text.find("(mydev:1, offset 0x") != std::string::npos);
    CHECK(text.find("read ") == std::string::npos);
    // The message names the very pointer the child printed.
    const size_t printed = text.find("pointer ");
    const size_t end = text.find('\n', printed);
    CHECK(printed != std::string::npos &&
          text.find("device pointer " +
                    text.substr(printed + 8, end - printed - 8)) !=
              std::string::npos);
  }
  std::remove(log);
  CHECK(run_child("--child-illegal-address", {}) == 0);
}

// Reserve / map / unmap, and the fragmentation that no longer causes an
// out-of-memory error.
void test_virtual_memory() {
  size_t granularity = 0;
  CHECK_OK(mydevMemGetGranularity(&granularity));
  CHECK(granularity == 65536);
  void* range = nullptr;
  CHECK_STATUS(mydevMemAddressReserve(&range, 1000, 0), mydevErrorInvalidValue);
  CHECK(last_message_has("multiples of the granularity"));
  CHECK_OK(mydevMemAddressReserve(&range, 8 * granularity, 0));
  char* base = static_cast<char*>(range);
  mydevPointerAttributes attr{};
  CHECK_OK(mydevPointerGetAttributes(&attr, base + granularity));
  CHECK(attr.type == mydevMemoryTypeDevice && attr.device == 0 &&
        attr.basePointer == base && attr.size == 8 * granularity);

  size_t free_before = 0;
  size_t total = 0;
  CHECK_OK(mydevMemGetInfo(0, &free_before, &total));
  CHECK_OK(mydevMemMap(base, 2 * granularity));
  size_t free_after = 0;
  CHECK_OK(mydevMemGetInfo(0, &free_after, &total));
  CHECK(free_before - free_after == 2 * granularity);
  CHECK_STATUS(mydevMemMap(base + granularity, granularity),
               mydevErrorInvalidValue);
  CHECK(last_message_has("already mapped"));
  CHECK_STATUS(mydevMemMap(base + 7 * granularity, 2 * granularity),
               mydevErrorInvalidValue);
  CHECK(last_message_has("not inside one reservation"));
  CHECK_OK(launch(default_stream(0), "fill head", [=] {
    std::memset(mydevKernelPointer(base), 7, 2 * granularity);
  }));
  // Grown in place: the next pages map right after the first ones.
  CHECK_OK(mydevMemMap(base + 2 * granularity, 2 * granularity));
  CHECK_OK(launch(default_stream(0), "fill tail", [=] {
    std::memset(mydevKernelPointer(base + 2 * granularity), 9, 2 * granularity);
  }));
  std::vector<unsigned char> back(4 * granularity);
  CHECK_OK(mydevMemcpy(back.data(), base, back.size(), mydevMemcpyDeviceToHost,
                       default_stream(0)));
  CHECK(back[0] == 7 && back[2 * granularity - 1] == 7 &&
        back[2 * granularity] == 9 && back.back() == 9);
  CHECK_STATUS(mydevMemAddressFree(base, 8 * granularity),
               mydevErrorInvalidValue);
  CHECK(last_message_has("still has mapped pages"));
  CHECK_STATUS(mydevFree(base), mydevErrorInvalidValue);
  CHECK_OK(mydevMemUnmap(base, 4 * granularity));
  CHECK_OK(mydevMemGetInfo(0, &free_after, &total));
  CHECK(free_after == free_before);
  CHECK_OK(mydevMemAddressFree(base, 8 * granularity));
  CHECK_STATUS(mydevMemMap(base, granularity), mydevErrorInvalidValue);

  // The false out-of-memory of a contiguous arena: 150 MiB, then a small
  // buffer after it, then the 150 MiB freed; 200 MiB must still fit in the
  // 256 MiB device.
  const size_t mib = size_t(1) << 20;
  void* first = nullptr;
  void* small = nullptr;
  void* large = nullptr;
  CHECK_OK(mydevMalloc(&first, 150 * mib, 0));
  CHECK_OK(mydevMalloc(&small, 4, 0));
  CHECK_OK(mydevFree(first));
  CHECK_OK(mydevMalloc(&large, 200 * mib, 0));
  CHECK_OK(mydevMemsetAsync(large, 1, 200 * mib, default_stream(0)));
  CHECK_OK(mydevStreamSynchronize(default_stream(0)));
  CHECK_STATUS(mydevMalloc(&first, 100 * mib, 0), mydevErrorMemoryAllocation);
  CHECK(
      last_message_has("mydev:0 out of memory: tried to allocate 104857600 "
                       "bytes"));
  CHECK_OK(mydevFree(large));
  CHECK_OK(mydevFree(small));
}

void test_devices() {
  int count = 0;
  CHECK_OK(mydevGetDeviceCount(&count));
  CHECK(count == 2);
  CHECK(mydevIsForkedChild() == 0);
  CHECK(mydevLaunchBlocking() == 0);
  CHECK_STATUS(mydevGetDeviceCount(nullptr), mydevErrorInvalidValue);
  CHECK(std::strlen(mydevGetLastErrorMessage()) > 0);

  int device = -1;
  CHECK_OK(mydevGetDevice(&device));
  CHECK(device == 0);
  CHECK(std::strlen(mydevGetLastErrorMessage()) == 0);
  CHECK_STATUS(mydevSetDevice(5), mydevErrorInvalidDevice);
  CHECK(last_message_has("mydev:5"));
  CHECK(last_message_has("2 mydev devices"));
  CHECK_STATUS(mydevSetDevice(-1), mydevErrorInvalidDevice);
  CHECK_OK(mydevSetDevice(1));
  int other_thread_device = -1;
  std::thread([&] { mydevGetDevice(&other_thread_device); }).join();
  CHECK(other_thread_device == 0);
  CHECK_OK(mydevGetDevice(&device));
  CHECK(device == 1);
  CHECK_OK(mydevSetDevice(0));

  mydevDeviceProp prop;
  CHECK_OK(mydevGetDeviceProperties(&prop, 1));
  CHECK(std::string(prop.name) == "mydev simulated device");
  CHECK(prop.totalGlobalMem == size_t(256) << 20);
  CHECK(prop.multiProcessorCount ==
        std::max(2, int(std::thread::hardware_concurrency())));
  CHECK(prop.major == 1 && prop.minor == 0);
  CHECK(prop.simdWidthBytes == 16 || prop.simdWidthBytes == 32);
  CHECK(prop.maxStreamsPerDevice == 0);
  CHECK(prop.canMapPeerMemory == 1);
  CHECK_STATUS(mydevGetDeviceProperties(&prop, 2), mydevErrorInvalidDevice);
  CHECK_STATUS(mydevGetDeviceProperties(nullptr, 0), mydevErrorInvalidValue);

  for (int code = 0; code <= 10; ++code) {
    CHECK(std::strlen(mydevGetErrorString(mydevError_t(code))) > 0);
  }
  int least = 1;
  int greatest = 1;
  CHECK_OK(mydevDeviceGetStreamPriorityRange(&least, &greatest));
  CHECK(least == 0 && greatest == -1);
}

// Bytes the OS holds for device 0's memory, read through its memfd.
long device_resident_bytes() {
  DIR* dir = opendir("/proc/self/fd");
  long bytes = -1;
  while (dirent* entry = readdir(dir)) {
    char path[320];
    char target[256] = {};
    std::snprintf(path, sizeof path, "/proc/self/fd/%s", entry->d_name);
    if (readlink(path, target, sizeof target - 1) <= 0) continue;
    if (std::strstr(target, "memfd:mydev:0 (deleted)") == nullptr) continue;
    struct stat st;
    if (stat(path, &st) == 0) bytes = long(st.st_blocks) * 512;
  }
  closedir(dir);
  return bytes;
}

void test_malloc_free() {
  const size_t capacity = size_t(256) << 20;
  void* ptr = reinterpret_cast<void*>(1);
  CHECK_OK(mydevMalloc(&ptr, 0, 0));
  CHECK(ptr == nullptr);
  CHECK_OK(mydevFree(nullptr));
  CHECK_STATUS(mydevMalloc(nullptr, 16, 0), mydevErrorInvalidValue);
  CHECK_STATUS(mydevMalloc(&ptr, 16, 7), mydevErrorInvalidDevice);

  std::vector<void*> small;
  for (int i = 1; i < 50; ++i) {
    void* p = nullptr;
    CHECK_OK(mydevMalloc(&p, size_t(i) * 37, 0));
    CHECK(reinterpret_cast<uintptr_t>(p) % 512 == 0);
    small.push_back(p);
  }
  size_t free_bytes = 0;
  size_t total = 0;
  CHECK_OK(mydevMemGetInfo(0, &free_bytes, &total));
  CHECK(total == capacity);
  CHECK(free_bytes < capacity);
  for (void* p : small) CHECK_OK(mydevFree(p));
  CHECK_OK(mydevMemGetInfo(0, &free_bytes, &total));
  CHECK(free_bytes == capacity);

  int local = 0;
  CHECK_STATUS(mydevFree(&local), mydevErrorInvalidValue);
  CHECK(last_message_has("mydevFree"));
  void* p = nullptr;
  CHECK_OK(mydevMalloc(&p, 4096, 0));
  CHECK_STATUS(mydevFree(static_cast<char*>(p) + 512), mydevErrorInvalidValue);
  CHECK_OK(mydevFree(p));
  CHECK_STATUS(mydevFree(p), mydevErrorInvalidValue);

  // Out of memory, with the device's numbers.
  CHECK_STATUS(mydevMalloc(&p, capacity + 1, 0), mydevErrorMemoryAllocation);
  CHECK(
      last_message_has("mydev:0 out of memory: tried to allocate 268435457 "
                       "bytes; 268435456 bytes free of 268435456 total"));
  CHECK_STATUS(mydevMalloc(&p, SIZE_MAX, 0), mydevErrorMemoryAllocation);

  // Fill the device in 1 MiB blocks, fragment it, then coalesce it back.
  const size_t block = size_t(1) << 20;
  std::vector<void*> blocks;
  for (size_t i = 0; i < capacity / block; ++i) {
    void* b = nullptr;
    CHECK_OK(mydevMalloc(&b, block, 0));
    blocks.push_back(b);
  }
  CHECK_OK(mydevMemGetInfo(0, &free_bytes, &total));
  CHECK(free_bytes == 0);
  CHECK_STATUS(mydevMalloc(&p, 1, 0), mydevErrorMemoryAllocation);
  CHECK(last_message_has("0 bytes free of 268435456 total"));
  // Every other block freed: no two free blocks are adjacent, yet all the
  // free memory is usable at once (device virtual memory).
  for (size_t i = 0; i < blocks.size(); i += 2) CHECK_OK(mydevFree(blocks[i]));
  void* scattered = nullptr;
  CHECK_OK(mydevMalloc(&scattered, capacity / 2, 0));
  CHECK_OK(launch(default_stream(0), "fill scattered", [=] {
    std::memset(mydevKernelPointer(scattered), 0x3c, capacity / 2);
  }));
  std::vector<unsigned char> tail(block);
  CHECK_OK(mydevMemcpy(tail.data(),
                       static_cast<char*>(scattered) + capacity / 2 - block,
                       block, mydevMemcpyDeviceToHost, default_stream(0)));
  CHECK(std::all_of(tail.begin(), tail.end(),
                    [](unsigned char b) { return b == 0x3c; }));
  CHECK_STATUS(mydevMalloc(&p, 1, 0), mydevErrorMemoryAllocation);
  CHECK_OK(mydevFree(scattered));
  std::vector<void*> rest;
  for (size_t i = 1; i < blocks.size(); i += 2) rest.push_back(blocks[i]);
  std::shuffle(rest.begin(), rest.end(), std::mt19937(42));
  for (void* b : rest) CHECK_OK(mydevFree(b));
  void* whole = nullptr;
  CHECK_OK(mydevMalloc(&whole, capacity, 0));
  CHECK_OK(mydevFree(whole));

  // Freeing a large block gives its pages back to the OS.
  void* big = nullptr;
  const size_t big_size = size_t(64) << 20;
  CHECK_OK(mydevMalloc(&big, big_size, 0));
  CHECK_OK(mydevMemsetAsync(big, 0xab, big_size, default_stream(0)));
  CHECK_OK(mydevStreamSynchronize(default_stream(0)));
  const long resident_before = device_resident_bytes();
  CHECK(resident_before >= long(big_size));
  CHECK_OK(mydevFree(big));
  const long resident_after = device_resident_bytes();
  CHECK(resident_after >= 0 &&
        resident_after <= resident_before - long(big_size));
}

void test_pointer_attributes() {
  mydevPointerAttributes attr;
  void* dev = nullptr;
  CHECK_OK(mydevMalloc(&dev, 1000, 1));
  CHECK_OK(mydevPointerGetAttributes(&attr, static_cast<char*>(dev) + 999));
  CHECK(attr.type == mydevMemoryTypeDevice);
  CHECK(attr.device == 1);
  CHECK(attr.basePointer == dev);
  CHECK(attr.size == 65536);  // whole pages of the 64 KiB granularity

  void* pinned = nullptr;
  CHECK_OK(mydevHostAlloc(&pinned, 10000));
  CHECK(reinterpret_cast<uintptr_t>(pinned) % 4096 == 0);
  CHECK_OK(mydevPointerGetAttributes(&attr, static_cast<char*>(pinned) + 5000));
  CHECK(attr.type == mydevMemoryTypeHost);
  CHECK(attr.device == -1);
  CHECK(attr.basePointer == pinned);
  CHECK(attr.size == 10000);
  CHECK_OK(
      mydevPointerGetAttributes(&attr, static_cast<char*>(pinned) + 10000));
  CHECK(attr.type == mydevMemoryTypeUnregistered);

  int local = 0;
  CHECK_OK(mydevPointerGetAttributes(&attr, &local));
  CHECK(attr.type == mydevMemoryTypeUnregistered);
  CHECK(attr.device == -1 && attr.basePointer == nullptr && attr.size == 0);
  CHECK_STATUS(mydevPointerGetAttributes(nullptr, &local),
               mydevErrorInvalidValue);

  CHECK_OK(mydevFree(dev));
  CHECK_OK(mydevPointerGetAttributes(&attr, dev));
  CHECK(attr.type == mydevMemoryTypeDevice && attr.basePointer == nullptr);
  CHECK_OK(mydevHostFree(pinned));
  CHECK_OK(mydevPointerGetAttributes(&attr, pinned));
  CHECK(attr.type == mydevMemoryTypeUnregistered);
  CHECK_STATUS(mydevHostFree(pinned), mydevErrorInvalidValue);
  CHECK_STATUS(mydevHostAlloc(nullptr, 16), mydevErrorInvalidValue);
}

void test_streams_and_ordering() {
  mydevStream_t stream = nullptr;
  CHECK_OK(mydevStreamCreate(&stream, 0, 0));
  CHECK_STATUS(mydevStreamCreate(nullptr, 0, 0), mydevErrorInvalidValue);
  CHECK_STATUS(mydevStreamCreate(&stream, 3, 0), mydevErrorInvalidDevice);

  std::atomic<int> value{0};
  std::vector<int> order;
  const auto start = Clock::now();
  CHECK_OK(launch(stream, "sleep_then_write", [&] {
    sleep_ms(100);
    value = 42;
    order.push_back(1);
  }));
  CHECK_OK(launch(stream, "second", [&] { order.push_back(value.load()); }));
  CHECK(ms_since(start) < 50);  // the host did not wait
  CHECK(value == 0);
  CHECK_STATUS(mydevStreamQuery(stream), mydevErrorNotReady);
  CHECK_OK(mydevStreamSynchronize(stream));
  CHECK(ms_since(start) >= 95);
  CHECK(value == 42);
  CHECK((order == std::vector<int>{1, 42}));
  CHECK_OK(mydevStreamQuery(stream));

  // Order holds across the blocks of the task queue, which grows behind a
  // slow task while the executor reads it (task_queue.h).
  std::vector<int> ran_in_order;
  CHECK_OK(launch(stream, "hold", [] { sleep_ms(20); }));
  for (int i = 0; i < 1000; ++i) {
    CHECK_OK(launch(stream, "append",
                    [&ran_in_order, i] { ran_in_order.push_back(i); }));
  }
  CHECK_OK(mydevStreamSynchronize(stream));
  std::vector<int> expected(1000);
  for (int i = 0; i < 1000; ++i) expected[i] = i;
  CHECK(ran_in_order == expected);

  int device = -1;
  int priority = 5;
  CHECK_OK(mydevStreamGetDevice(stream, &device));
  CHECK(device == 0);
  CHECK_OK(mydevStreamGetPriority(stream, &priority));
  CHECK(priority == 0);
  mydevStream_t high = nullptr;
  CHECK_OK(mydevStreamCreate(&high, 1, -7));  // clamped, as on CUDA
  CHECK_OK(mydevStreamGetPriority(high, &priority));
  CHECK(priority == -1);
  CHECK_OK(mydevStreamGetDevice(high, &device));
  CHECK(device == 1);

  // nullptr is the current device's default stream.
  std::atomic<int> ran{0};
  CHECK_OK(launch(nullptr, "on_null_stream", [&] { ran = 1; }));
  CHECK_OK(mydevStreamSynchronize(default_stream(0)));
  CHECK(ran == 1);
  CHECK_STATUS(mydevLaunchKernel(stream, "null_fn", nullptr, nullptr),
               mydevErrorInvalidValue);

  // Default stream: always the same handle, never destroyed.
  CHECK(default_stream(1) == default_stream(1));
  CHECK(default_stream(0) != default_stream(1));
  CHECK_STATUS(mydevStreamDestroy(default_stream(0)), mydevErrorInvalidHandle);
  CHECK_STATUS(mydevStreamGetDefault(2, &high), mydevErrorInvalidDevice);

  // Destroy waits for the stream's work.
  std::atomic<int> finished{0};
  CHECK_OK(launch(stream, "slow", [&] {
    sleep_ms(50);
    finished = 1;
  }));
  CHECK_OK(mydevStreamDestroy(stream));
  CHECK(finished == 1);
  CHECK_OK(mydevStreamDestroy(high));
}

// A thread asleep in a synchronize is woken by the task it waits for, not by
// every task before it: behind many short kernels each wake-up would take a
// core from the kernels themselves. Counted as the waiting thread's
// voluntary context switches (each sleep ends in one).
long voluntary_switches_of_this_thread() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  return usage.ru_nvcsw;
}

void test_synchronize_wakeups() {
  mydevStream_t stream = nullptr;
  CHECK_OK(mydevStreamCreate(&stream, 0, 0));
  constexpr int kKernels = 100;
  std::atomic<int> ran{0};
  for (int i = 0; i < kKernels; ++i) {
    // Long enough for the waiter to go back to sleep between two kernels.
    CHECK_OK(launch(stream, "short", [&] {
      sleep_ms(1);
      ++ran;
    }));
  }
  long switches = 0;
  within(60, "synchronize behind short kernels", [&] {
    const long before = voluntary_switches_of_this_thread();
    CHECK_OK(mydevStreamSynchronize(stream));
    switches = voluntary_switches_of_this_thread() - before;
  });
  CHECK(ran == kKernels);
  CHECK(switches < kKernels / 4);

  // Two waiters with different targets: the one waiting for an earlier task
  // returns while a later one still runs, the other once everything ran.
  std::promise<void> first_release, second_release;
  std::shared_future<void> first = first_release.get_future().share();
  std::shared_future<void> second = second_release.get_future().share();
  mydevEvent_t after_first = nullptr;
  CHECK_OK(mydevEventCreate(&after_first, mydevEventBlockingSync));
  CHECK_OK(launch(stream, "held_first", [first] { first.wait(); }));
  CHECK_OK(mydevEventRecord(after_first, stream));
  CHECK_OK(launch(stream, "held_second", [second] { second.wait(); }));
  within(60, "two waiters", [&] {
    auto event_waiter = std::async(
        std::launch::async, [&] { return mydevEventSynchronize(after_first); });
    auto stream_waiter = std::async(
        std::launch::async, [&] { return mydevStreamSynchronize(stream); });
    first_release.set_value();
    CHECK_OK(event_waiter.get());
    CHECK_STATUS(mydevStreamQuery(stream), mydevErrorNotReady);
    second_release.set_value();
    CHECK_OK(stream_waiter.get());
  });
  CHECK_OK(mydevEventDestroy(after_first));
  CHECK_OK(mydevStreamDestroy(stream));
}

void test_events() {
  mydevStream_t stream = nullptr;
  mydevStream_t idle = nullptr;
  CHECK_OK(mydevStreamCreate(&stream, 0, 0));
  CHECK_OK(mydevStreamCreate(&idle, 0, 0));
  mydevEvent_t start = nullptr;
  mydevEvent_t end = nullptr;
  mydevEvent_t untimed = nullptr;
  CHECK_OK(mydevEventCreate(&start, mydevEventDefault));
  CHECK_OK(mydevEventCreate(&end, mydevEventBlockingSync));
  CHECK_OK(mydevEventCreate(&untimed, mydevEventDisableTiming));
  CHECK_STATUS(mydevEventCreate(nullptr, 0), mydevErrorInvalidValue);
  CHECK_STATUS(mydevEventCreate(&untimed, 64), mydevErrorInvalidValue);
  CHECK_STATUS(mydevEventQuery(nullptr), mydevErrorInvalidHandle);

  CHECK_OK(mydevEventQuery(start));  // never recorded
  CHECK_OK(mydevEventSynchronize(start));
  float ms = -1;
  CHECK_STATUS(mydevEventElapsedTime(&ms, start, end), mydevErrorInvalidValue);
  CHECK(last_message_has("recorded"));

  CHECK_OK(mydevEventRecord(start, stream));
  CHECK_OK(launch(stream, "sleep20", [] { sleep_ms(20); }));
  CHECK_OK(mydevEventRecord(end, stream));
  CHECK_OK(mydevEventRecord(untimed, stream));
  CHECK_STATUS(mydevEventQuery(end), mydevErrorNotReady);
  CHECK_STATUS(mydevEventQuery(untimed), mydevErrorNotReady);
  CHECK_STATUS(mydevEventElapsedTime(&ms, start, end), mydevErrorNotReady);
  CHECK_OK(mydevEventSynchronize(end));
  CHECK_OK(mydevEventQuery(end));
  CHECK_OK(mydevEventSynchronize(untimed));
  CHECK_OK(mydevEventElapsedTime(&ms, start, end));
  CHECK(ms >= 19.5f && ms < 200.0f);
  CHECK_STATUS(mydevEventElapsedTime(&ms, start, untimed),
               mydevErrorInvalidValue);
  CHECK(last_message_has("DisableTiming"));
  CHECK_STATUS(mydevEventElapsedTime(nullptr, start, end),
               mydevErrorInvalidValue);

  // Re-recording replaces the capture, and the stale marker of the earlier
  // record must not overwrite the new timestamp.
  CHECK_OK(launch(stream, "sleep100", [] { sleep_ms(100); }));
  CHECK_OK(mydevEventRecord(end, stream));
  CHECK_OK(mydevEventRecord(start, idle));
  CHECK_OK(mydevEventRecord(end, idle));
  const auto t0 = Clock::now();
  CHECK_OK(mydevEventSynchronize(end));
  CHECK(ms_since(t0) < 50);
  CHECK_OK(mydevStreamSynchronize(stream));  // the stale marker has run
  CHECK_OK(mydevEventElapsedTime(&ms, start, end));
  CHECK(ms >= 0.0f && ms < 50.0f);

  // Destroying an event whose record is still pending.
  mydevEvent_t pending = nullptr;
  CHECK_OK(mydevEventCreate(&pending, 0));
  CHECK_OK(launch(stream, "sleep30", [] { sleep_ms(30); }));
  CHECK_OK(mydevEventRecord(pending, stream));
  CHECK_OK(mydevEventDestroy(pending));
  CHECK_OK(mydevStreamSynchronize(stream));

  // An event outlives the stream it was recorded on.
  mydevEvent_t survivor = nullptr;
  CHECK_OK(mydevEventCreate(&survivor, 0));
  mydevStream_t doomed = nullptr;
  CHECK_OK(mydevStreamCreate(&doomed, 1, 0));
  CHECK_OK(launch(doomed, "sleep10", [] { sleep_ms(10); }));
  CHECK_OK(mydevEventRecord(survivor, doomed));
  CHECK_OK(mydevStreamDestroy(doomed));
  CHECK_OK(mydevEventQuery(survivor));
  CHECK_OK(mydevEventSynchronize(survivor));
  CHECK_STATUS(mydevStreamQuery(doomed), mydevErrorInvalidHandle);

  for (mydevEvent_t e : {start, end, untimed, survivor}) {
    CHECK_OK(mydevEventDestroy(e));
  }
  CHECK_OK(mydevStreamDestroy(stream));
  CHECK_OK(mydevStreamDestroy(idle));
}

void test_wait_event_across_streams() {
  mydevStream_t producer = nullptr;
  mydevStream_t consumer = nullptr;
  CHECK_OK(mydevStreamCreate(&producer, 0, 0));
  CHECK_OK(mydevStreamCreate(&consumer, 1, 0));
  mydevEvent_t ready = nullptr;
  CHECK_OK(mydevEventCreate(&ready, mydevEventDisableTiming));

  std::atomic<int> flag{0};
  std::atomic<int> seen{-1};
  CHECK_OK(launch(producer, "produce", [&] {
    sleep_ms(60);
    flag = 1;
  }));
  CHECK_OK(mydevEventRecord(ready, producer));
  const auto start = Clock::now();
  CHECK_OK(mydevStreamWaitEvent(consumer, ready));
  CHECK_OK(launch(consumer, "consume", [&] { seen = flag.load(); }));
  CHECK(ms_since(start) < 30);  // the host is not blocked
  CHECK_OK(mydevStreamSynchronize(consumer));
  CHECK(seen == 1);

  // Waiting on a never-recorded event and on the same stream are no-ops.
  mydevEvent_t fresh = nullptr;
  CHECK_OK(mydevEventCreate(&fresh, 0));
  CHECK_OK(mydevStreamWaitEvent(consumer, fresh));
  CHECK_OK(mydevEventRecord(fresh, consumer));
  CHECK_OK(mydevStreamWaitEvent(consumer, fresh));
  CHECK_OK(mydevStreamSynchronize(consumer));
  CHECK_STATUS(mydevStreamWaitEvent(consumer, nullptr),
               mydevErrorInvalidHandle);

  CHECK_OK(mydevEventDestroy(ready));
  CHECK_OK(mydevEventDestroy(fresh));
  CHECK_OK(mydevStreamDestroy(producer));
  CHECK_OK(mydevStreamDestroy(consumer));
}

void test_kernel_failure() {
  mydevStream_t stream = nullptr;
  CHECK_OK(mydevStreamCreate(&stream, 0, 0));
  std::atomic<int> after{0};
  CHECK_OK(launch(stream, "aten::boom", [] {
    throw std::runtime_error("index 7 is out of bounds");
  }));
  CHECK_OK(launch(stream, "after", [&] { after = 1; }));
  CHECK_OK(mydevLaunchKernel(
      stream, "second_failure", [](void*) { throw 42; }, nullptr));
  // A query neither waits for nor reports the failure.
  while (mydevStreamQuery(stream) == mydevErrorNotReady) sleep_ms(1);
  CHECK_STATUS(mydevStreamSynchronize(stream), mydevErrorLaunchFailure);
  // The first failure, and a count of the later ones it hides.
  CHECK(
      std::string(mydevGetLastErrorMessage()) ==
      "kernel 'aten::boom' failed on mydev:0: index 7 is out of bounds (and 1 "
      "more kernel failure on mydev:0 after it, before this report)");
  CHECK(after == 1);
  CHECK_OK(mydevStreamSynchronize(stream));  // reported once, then cleared

  // The stream stays usable; the failure surfaces through the other
  // synchronizing calls too.
  CHECK_OK(mydevLaunchKernel(
      stream, "third_failure", [](void*) { throw 42; }, nullptr));
  CHECK_STATUS(mydevDeviceSynchronize(0), mydevErrorLaunchFailure);
  CHECK(last_message_has("kernel 'third_failure' failed on mydev:0: unknown"));
  CHECK_OK(mydevDeviceSynchronize(0));

  mydevEvent_t event = nullptr;
  CHECK_OK(mydevEventCreate(&event, 0));
  CHECK_OK(
      launch(stream, "fourth_failure", [] { throw std::logic_error("four"); }));
  CHECK_OK(mydevEventRecord(event, stream));
  CHECK_STATUS(mydevEventSynchronize(event), mydevErrorLaunchFailure);
  CHECK(last_message_has("four"));

  void* device = nullptr;
  char host[64] = {};
  CHECK_OK(mydevMalloc(&device, 64, 0));
  CHECK_OK(launch(stream, "fifth_failure",
                  [] { throw std::runtime_error("five"); }));
  CHECK_STATUS(mydevMemcpy(host, device, 64, mydevMemcpyDeviceToHost, stream),
               mydevErrorLaunchFailure);
  CHECK(last_message_has("five"));
  std::atomic<int> still_runs{0};
  CHECK_OK(launch(stream, "still_runs", [&] { still_runs = 1; }));
  CHECK_OK(mydevStreamSynchronize(stream));
  CHECK(still_runs == 1);

  CHECK_OK(mydevFree(device));
  CHECK_OK(mydevEventDestroy(event));
  CHECK_OK(mydevStreamDestroy(stream));
}

std::vector<unsigned char> pattern(size_t size, unsigned seed) {
  std::vector<unsigned char> bytes(size);
  std::mt19937 rng(seed);
  for (auto& b : bytes) b = static_cast<unsigned char>(rng());
  return bytes;
}

void test_memcpy() {
  mydevStream_t stream = nullptr;
  CHECK_OK(mydevStreamCreate(&stream, 0, 0));

  for (size_t size : {size_t(1000), size_t(1) << 20, size_t(33) << 20}) {
    const std::vector<unsigned char> source = pattern(size, unsigned(size));
    void* d0 = nullptr;
    void* d1 = nullptr;
    CHECK_OK(mydevMalloc(&d0, size, 0));
    CHECK_OK(mydevMalloc(&d1, size, 1));

    // Pageable both ways.
    std::vector<unsigned char> back(size);
    CHECK_OK(
        mydevMemcpy(d0, source.data(), size, mydevMemcpyHostToDevice, stream));
    CHECK_OK(
        mydevMemcpy(back.data(), d0, size, mydevMemcpyDeviceToHost, stream));
    CHECK(back == source);

    // Device to device, across devices, with the kind inferred.
    CHECK_OK(mydevMemcpyAsync(d1, d0, size, mydevMemcpyDefault, stream));
    std::fill(back.begin(), back.end(), 0);
    CHECK_OK(mydevMemcpy(back.data(), d1, size, mydevMemcpyDefault, stream));
    CHECK(back == source);

    // Pinned both ways, enqueued behind a slow kernel.
    void* pinned_in = nullptr;
    void* pinned_out = nullptr;
    CHECK_OK(mydevHostAlloc(&pinned_in, size));
    CHECK_OK(mydevHostAlloc(&pinned_out, size));
    std::memcpy(pinned_in, source.data(), size);
    std::memset(pinned_out, 0, size);
    CHECK_OK(mydevMemsetAsync(d0, 0, size, stream));
    CHECK_OK(launch(stream, "sleep50", [] { sleep_ms(50); }));
    const auto start = Clock::now();
    CHECK_OK(
        mydevMemcpyAsync(d0, pinned_in, size, mydevMemcpyHostToDevice, stream));
    CHECK_OK(mydevMemcpyAsync(pinned_out, d0, size, mydevMemcpyDeviceToHost,
                              stream));
    CHECK(ms_since(start) < 30);
    CHECK_OK(mydevStreamSynchronize(stream));
    CHECK(std::memcmp(pinned_out, source.data(), size) == 0);

    // Pageable async waits for the stream's earlier work.
    CHECK_OK(launch(stream, "write_late", [=] {
      sleep_ms(50);
      std::memset(mydevKernelPointer(d0), 0x5a, size);
    }));
    const auto pageable_start = Clock::now();
    CHECK_OK(mydevMemcpyAsync(back.data(), d0, size, mydevMemcpyDeviceToHost,
                              stream));
    CHECK(ms_since(pageable_start) >= 45);
    CHECK(std::all_of(back.begin(), back.end(),
                      [](unsigned char b) { return b == 0x5a; }));

    // Memset on a slice.
    CHECK_OK(
        mydevMemsetAsync(static_cast<char*>(d1) + 1, 0x11, size - 2, stream));
    CHECK_OK(
        mydevMemcpy(back.data(), d1, size, mydevMemcpyDeviceToHost, stream));
    CHECK(back.front() == source.front() && back.back() == source.back());
    CHECK(std::count(back.begin(), back.end(), 0x11) >=
          std::ptrdiff_t(size - 2));

    CHECK_OK(mydevHostFree(pinned_in));
    CHECK_OK(mydevHostFree(pinned_out));
    CHECK_OK(mydevFree(d0));
    CHECK_OK(mydevFree(d1));
  }

  // Validation. Allocations are whole pages of the granularity.
  void* dev = nullptr;
  static char host[65536 + 1];
  CHECK_OK(mydevMalloc(&dev, 65536, 0));
  CHECK_STATUS(mydevMemcpy(host, dev, 65537, mydevMemcpyDeviceToHost, stream),
               mydevErrorInvalidValue);
  CHECK(last_message_has("runs past the end of its allocation"));
  CHECK_STATUS(mydevMemcpy(host, static_cast<char*>(dev) + 100, 65500,
                           mydevMemcpyDefault, stream),
               mydevErrorInvalidValue);
  CHECK_STATUS(mydevMemcpy(dev, host, 16, mydevMemcpyDeviceToHost, stream),
               mydevErrorInvalidValue);
  CHECK(last_message_has("kind DeviceToHost"));
  CHECK_STATUS(mydevMemcpy(dev, host, 16, mydevMemcpyKind(9), stream),
               mydevErrorInvalidValue);
  CHECK_STATUS(mydevMemcpy(nullptr, host, 16, mydevMemcpyDefault, stream),
               mydevErrorInvalidValue);
  CHECK_OK(mydevMemcpy(nullptr, nullptr, 0, mydevMemcpyDefault, stream));
  CHECK_STATUS(mydevMemsetAsync(host, 0, 16, stream), mydevErrorInvalidValue);
  CHECK_STATUS(mydevMemsetAsync(dev, 0, 65537, stream), mydevErrorInvalidValue);
  CHECK_OK(mydevMemcpy(host, host + 2048, 2048, mydevMemcpyHostToHost, stream));
  CHECK_OK(mydevFree(dev));
  CHECK_STATUS(mydevMemcpy(host, dev, 16, mydevMemcpyDeviceToHost, stream),
               mydevErrorInvalidValue);
  CHECK(last_message_has("not inside a live allocation"));
  CHECK_OK(mydevStreamDestroy(stream));
}

void test_concurrent_launches() {
  constexpr int kThreads = 8;
  constexpr int kLaunches = 10000;
  static std::atomic<long> counter{0};
  counter = 0;
  std::vector<mydevStream_t> own(kThreads, nullptr);
  for (int t = 0; t < kThreads; t += 2) {
    CHECK_OK(
        mydevStreamCreate(&own[t], t % 4 == 0 ? 0 : 1, t % 3 == 0 ? -1 : 0));
  }
  std::atomic<int> failures{0};
  within(120, "concurrent launches", [&] {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        // Odd threads share the default streams.
        mydevStream_t stream =
            own[t] != nullptr ? own[t] : default_stream(t % 2);
        for (int i = 0; i < kLaunches; ++i) {
          if (mydevLaunchKernel(
                  stream, "increment", [](void*) { counter.fetch_add(1); },
                  nullptr) != mydevSuccess) {
            ++failures;
          }
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    CHECK_OK(mydevDeviceSynchronize(0));
    CHECK_OK(mydevDeviceSynchronize(1));
  });
  CHECK(failures == 0);
  CHECK(counter == long(kThreads) * kLaunches);
  for (mydevStream_t stream : own) {
    if (stream != nullptr) CHECK_OK(mydevStreamDestroy(stream));
  }
}

void test_priority_gate() {
  mydevDeviceProp prop;
  CHECK_OK(mydevGetDeviceProperties(&prop, 0));
  const int slots = prop.multiProcessorCount;

  // Occupy every slot, queue a normal then a high-priority kernel, free one
  // slot: the high-priority kernel must get it.
  std::vector<mydevStream_t> blockers(size_t(slots), nullptr);
  std::vector<std::atomic<int>> release(static_cast<size_t>(slots));
  std::atomic<int> started{0};
  std::mutex order_mutex;
  std::vector<std::string> order;
  for (int i = 0; i < slots; ++i) {
    release[size_t(i)] = 0;
    CHECK_OK(mydevStreamCreate(&blockers[size_t(i)], 0, 0));
    std::atomic<int>* gate = &release[size_t(i)];
    CHECK_OK(launch(blockers[size_t(i)], "blocker", [gate, &started] {
      ++started;
      while (gate->load() == 0) sleep_ms(1);
    }));
  }
  while (started < slots) sleep_ms(1);
  mydevStream_t low = nullptr;
  mydevStream_t high = nullptr;
  CHECK_OK(mydevStreamCreate(&low, 0, 0));
  CHECK_OK(mydevStreamCreate(&high, 0, -1));
  auto note = [&](const char* name) {
    std::lock_guard<std::mutex> lock(order_mutex);
    order.emplace_back(name);
  };
  CHECK_OK(launch(low, "low", [&] { note("low"); }));
  sleep_ms(20);
  CHECK_OK(launch(high, "high", [&] { note("high"); }));
  sleep_ms(20);
  CHECK(order.empty());
  release[0] = 1;
  within(30, "priority gate", [&] {
    CHECK_OK(mydevStreamSynchronize(high));
    for (auto& r : release) r = 1;
    CHECK_OK(mydevDeviceSynchronize(0));
  });
  CHECK((order == std::vector<std::string>{"high", "low"}));

  // Many streams of both priorities, chained through events across devices,
  // with more streams than slots: everything must complete.
  std::vector<mydevStream_t> streams;
  for (int i = 0; i < 8; ++i) {
    mydevStream_t s = nullptr;
    CHECK_OK(mydevStreamCreate(&s, i % 2, i % 3 == 0 ? -1 : 0));
    streams.push_back(s);
  }
  std::atomic<int> done{0};
  std::vector<mydevEvent_t> events;
  for (int round = 0; round < 50; ++round) {
    for (size_t i = 0; i < streams.size(); ++i) {
      CHECK_OK(launch(streams[i], "work", [&] {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
        ++done;
      }));
      mydevEvent_t event = nullptr;
      CHECK_OK(mydevEventCreate(&event, mydevEventDisableTiming));
      CHECK_OK(mydevEventRecord(event, streams[i]));
      CHECK_OK(mydevStreamWaitEvent(streams[(i + 1) % streams.size()], event));
      events.push_back(event);
    }
  }
  within(60, "priority stress", [&] {
    CHECK_OK(mydevDeviceSynchronize(0));
    CHECK_OK(mydevDeviceSynchronize(1));
  });
  CHECK(done == 50 * 8);
  for (mydevEvent_t e : events) CHECK_OK(mydevEventDestroy(e));
  for (mydevStream_t s : streams) CHECK_OK(mydevStreamDestroy(s));
  for (mydevStream_t s : blockers) CHECK_OK(mydevStreamDestroy(s));
  CHECK_OK(mydevStreamDestroy(low));
  CHECK_OK(mydevStreamDestroy(high));
}

void test_fork_child_refusal() {
  const pid_t pid = fork();
  if (pid == 0) {
    int ok = mydevIsForkedChild() == 1;
    ok &= mydevIsInitialized() == 1;
    // Configuration queries still answer, as on CUDA.
    int count = 0;
    ok &= mydevGetDeviceCount(&count) == mydevSuccess && count == 2;
    mydevDeviceProp prop{};
    ok &= mydevGetDeviceProperties(&prop, 0) == mydevSuccess;
    void* ptr = nullptr;
    ok &= mydevMalloc(&ptr, 16, 0) == mydevErrorNotPermitted;
    ok &= std::strstr(mydevGetLastErrorMessage(),
                      "Cannot re-initialize mydev in forked subprocess") !=
          nullptr;
    ok &= std::strstr(mydevGetLastErrorMessage(), "'spawn' start method") !=
          nullptr;
    ok &= mydevStreamSynchronize(nullptr) == mydevErrorNotPermitted;
    ok &= std::strlen(mydevGetErrorString(mydevErrorNotPermitted)) > 0;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK(mydevIsForkedChild() == 0);
  CHECK_OK(mydevDeviceSynchronize(0));  // the parent is unaffected
}

void test_child_processes() {
  CHECK(run_child("--child-launch-blocking",
                  {"MYDEV_LAUNCH_BLOCKING=1", "MYDEV_MEMORY_MB=64"}) == 0);
  CHECK(run_child("--child-bad-config", {"MYDEV_DEVICE_COUNT=abc"}) == 0);
  CHECK(run_child("--child-bad-config", {"MYDEV_DEVICE_COUNT=65"}) == 0);
  CHECK(run_child("--child-bad-config", {"MYDEV_DEVICE_COUNT=-1"}) == 0);
  CHECK(run_child("--child-defaults", {}) == 0);
  CHECK(run_child("--child-zero-devices", {"MYDEV_DEVICE_COUNT=0"}) == 0);
  CHECK(run_child("--child-fork-before-init", {"MYDEV_MEMORY_MB=64"}) == 0);
  double elapsed = 0;
  CHECK(run_child("--child-exit-with-work", {"MYDEV_MEMORY_MB=128"},
                  &elapsed) == 0);
  CHECK(elapsed < 3000);
  std::printf("  exit with 400 queued kernels took %.0f ms\n", elapsed);
}

void measure_latency() {
  constexpr int kLaunches = 100000;
  mydevStream_t stream = nullptr;
  CHECK_OK(mydevStreamCreate(&stream, 0, 0));
  for (int i = 0; i < 1000; ++i) {
    mydevLaunchKernel(stream, "warm", empty_kernel, nullptr);
  }
  mydevStreamSynchronize(stream);

  // Round trip: launch an empty kernel, wait for it.
  auto start = Clock::now();
  for (int i = 0; i < kLaunches; ++i) {
    mydevLaunchKernel(stream, "empty", empty_kernel, nullptr);
    mydevStreamSynchronize(stream);
  }
  const double round_trip_us = ms_since(start) * 1000 / kLaunches;

  // Enqueue to start of execution, the kernel stamping its start time.
  static std::atomic<int64_t> started_ns{0};
  double latency_total_us = 0;
  for (int i = 0; i < kLaunches; ++i) {
    const auto enqueue = Clock::now();
    mydevLaunchKernel(
        stream, "stamp",
        [](void*) {
          started_ns.store(Clock::now().time_since_epoch().count());
        },
        nullptr);
    mydevStreamSynchronize(stream);
    latency_total_us +=
        double(started_ns.load() - enqueue.time_since_epoch().count()) / 1000;
  }
  const double latency_us = latency_total_us / kLaunches;

  // The same from an idle stream, whose executor went to sleep.
  constexpr int kIdleLaunches = 2000;
  double idle_total_us = 0;
  for (int i = 0; i < kIdleLaunches; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(500));
    const auto enqueue = Clock::now();
    mydevLaunchKernel(
        stream, "stamp",
        [](void*) {
          started_ns.store(Clock::now().time_since_epoch().count());
        },
        nullptr);
    mydevStreamSynchronize(stream);
    idle_total_us +=
        double(started_ns.load() - enqueue.time_since_epoch().count()) / 1000;
  }
  const double idle_latency_us = idle_total_us / kIdleLaunches;

  // Host cost of a launch, with the executor draining concurrently.
  start = Clock::now();
  for (int i = 0; i < kLaunches; ++i) {
    mydevLaunchKernel(stream, "empty", empty_kernel, nullptr);
  }
  const double enqueue_ns = ms_since(start) * 1e6 / kLaunches;
  mydevStreamSynchronize(stream);
  const double throughput_ns = ms_since(start) * 1e6 / kLaunches;

  // Copy bandwidth, device to device, 256 MiB.
  const size_t size = size_t(128) << 20;
  void* a = nullptr;
  void* b = nullptr;
  CHECK_OK(mydevMalloc(&a, size, 0));
  CHECK_OK(mydevMalloc(&b, size, 0));
  CHECK_OK(mydevMemsetAsync(a, 1, size, stream));
  CHECK_OK(mydevMemsetAsync(b, 2, size, stream));
  CHECK_OK(mydevMemcpy(b, a, size, mydevMemcpyDeviceToDevice, stream));
  start = Clock::now();
  for (int i = 0; i < 5; ++i) {
    CHECK_OK(mydevMemcpyAsync(b, a, size, mydevMemcpyDeviceToDevice, stream));
  }
  CHECK_OK(mydevStreamSynchronize(stream));
  const double gbps = 5.0 * double(size) / (ms_since(start) / 1000) / 1e9;
  CHECK_OK(mydevFree(a));
  CHECK_OK(mydevFree(b));
  CHECK_OK(mydevStreamDestroy(stream));

  std::printf("  launch + synchronize round trip: %.2f us (avg of %d)\n",
              round_trip_us, kLaunches);
  std::printf("  enqueue -> kernel start latency: %.2f us (avg of %d)\n",
              latency_us, kLaunches);
  std::printf(
      "  enqueue -> kernel start on an idle stream: %.2f us (avg of "
      "%d)\n",
      idle_latency_us, kIdleLaunches);
  std::printf(
      "  host cost per launch: %.0f ns; %d launches drained at "
      "%.0f ns each\n",
      enqueue_ns, kLaunches, throughput_ns);
  std::printf("  device-to-device copy of 128 MiB: %.1f GB/s\n", gbps);
}

}  // namespace

void test_peer_memory() {
  mydevDeviceProp prop{};
  CHECK_OK(mydevGetDeviceProperties(&prop, 0));
  CHECK(prop.canMapPeerMemory == 1);
  void* buffer = nullptr;
  CHECK_OK(mydevMalloc(&buffer, 8192, 0));
  CHECK_OK(launch(default_stream(0), "fill", [&] {
    auto* bytes = static_cast<unsigned char*>(mydevKernelPointer(buffer));
    for (int i = 0; i < 4096; ++i)
      bytes[i] = static_cast<unsigned char>(i % 251);
  }));
  CHECK_OK(mydevDeviceSynchronize(0));
  mydevIpcMemHandle_t handle{};
  CHECK_OK(mydevIpcGetMemHandle(&handle, static_cast<char*>(buffer) + 100));
  void* own = nullptr;
  CHECK_OK(mydevIpcOpenMemHandle(&own, handle));
  CHECK(own == buffer);  // this process's handle: its own allocation
  CHECK_OK(mydevIpcCloseMemHandle(own));
  int host = 0;
  CHECK_STATUS(mydevIpcGetMemHandle(&handle, &host), mydevErrorInvalidValue);
  mydevIpcMemHandle_t garbage{};
  CHECK_STATUS(mydevIpcOpenMemHandle(&own, garbage), mydevErrorInvalidValue);
  CHECK_OK(mydevIpcGetMemHandle(&handle, buffer));
  std::string hex = "IPC_TEST_HANDLE=";
  for (char c : handle.reserved) {
    char digits[3];
    std::snprintf(digits, sizeof(digits), "%02x",
                  static_cast<unsigned char>(c));
    hex += digits;
  }
  CHECK(run_child("--child-ipc", {hex}) == 0);
  CHECK(run_child("--child-ipc", {hex, "IPC_TEST_EXPECT_REFUSAL=1",
                                  "MYDEV_PEER_MEMORY=0"}) == 0);
  CHECK_OK(mydevFree(buffer));
}

// The team an executor gives its kernels beside other processes' load
// (host_threads.h); the program has no OpenMP, so the rule is checked alone.
void test_kernel_team_size() {
  using mydev_sim::kernel_team_size;
  CHECK(kernel_team_size(0.0, 2, 2) == 2);
  CHECK(kernel_team_size(0.2, 2, 2) == 2);  // noise
  CHECK(kernel_team_size(0.5, 2, 2) == 1);  // one busy process, shared
  CHECK(kernel_team_size(1.0, 2, 2) == 1);
  CHECK(kernel_team_size(2.0, 2, 2) == 1);  // never below one thread
  CHECK(kernel_team_size(3.0, 8, 8) == 5);
  CHECK(kernel_team_size(1.0, 8, 2) == 2);  // room left for the whole team
  CHECK(kernel_team_size(0.0, 2, 8) == 8);  // an idle host: the user's size
  CHECK(kernel_team_size(0.6, 2, 8) == 1);
}

void test_team_spin() {
  using mydev_sim::kKernelMayUseTeamAfter;
  using mydev_sim::kTeamSpinsAfterRegion;
  using mydev_sim::TeamSpin;
  TeamSpin spin;
  const TeamSpin::Clock::time_point t0 = TeamSpin::Clock::now();
  CHECK(!spin.may_spin(t0));
  // Small kernels leave the team as it was.
  spin.note_kernel(t0, t0 + kKernelMayUseTeamAfter / 2);
  CHECK(!spin.may_spin(t0 + kKernelMayUseTeamAfter));
  // A long one counts once no involuntary switch came since the previous
  // look (the first look sees all the thread's switches so far; a few more
  // tries absorb a preemption between two looks).
  const auto ended = t0 + 2 * kKernelMayUseTeamAfter;
  for (int look = 0; look < 4 && !spin.may_spin(ended); ++look) {
    spin.note_kernel(t0, ended);
  }
  CHECK(spin.may_spin(ended));
  CHECK(spin.may_spin(ended + kTeamSpinsAfterRegion / 2));
  CHECK(!spin.may_spin(ended + kTeamSpinsAfterRegion));

  // A preemption (here forced: this thread and a spinning one share a core
  // for 50 ms) since the previous look makes a long kernel not count...
  const auto involuntary_switches = [] {
    rusage usage{};
    getrusage(RUSAGE_THREAD, &usage);
    return usage.ru_nivcsw;
  };
  const auto force_preemption = [&] {
    cpu_set_t all{}, one{};
    sched_getaffinity(0, sizeof all, &all);
    CPU_SET(sched_getcpu(), &one);
    sched_setaffinity(0, sizeof one, &one);
    const long before = involuntary_switches();
    std::atomic<bool> stop{false};
    std::thread rival([&] {
      sched_setaffinity(0, sizeof one, &one);
      while (!stop.load()) {
      }
    });
    const auto until = TeamSpin::Clock::now() + std::chrono::milliseconds(50);
    while (TeamSpin::Clock::now() < until) {
    }
    stop = true;
    rival.join();
    sched_setaffinity(0, sizeof all, &all);
    CHECK(involuntary_switches() > before);
  };
  const auto long_kernel_counts = [&] {
    const auto began = TeamSpin::Clock::now() + kTeamSpinsAfterRegion;
    spin.note_kernel(began, began + 2 * kKernelMayUseTeamAfter);
    return spin.may_spin(began + 2 * kKernelMayUseTeamAfter);
  };
  force_preemption();
  CHECK(!long_kernel_counts());
  // ...unless the executor slept since: the host's CPU work preempting its
  // spin for work says nothing of the kernels after it woke.
  force_preemption();
  spin.note_woken();
  CHECK(long_kernel_counts());
}

bool team_threads_running() { return mydev_sim::team_threads().any_running; }

void test_team_threads() {
  // A thread of its own name, whose threads stand in for an OpenMP team:
  // they inherit the name, as libgomp's do from the executor.
  std::thread executor([] {
    pthread_setname_np(pthread_self(), "team-test");
    CHECK(!team_threads_running());  // no team
    std::atomic<bool> stop{false};
    std::mutex mutex;
    std::condition_variable woken;
    std::thread sleeper([&] {
      std::unique_lock<std::mutex> lock(mutex);
      woken.wait(lock, [&] { return stop.load(); });
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    CHECK(!team_threads_running());  // a team asleep
    CHECK(mydev_sim::team_threads().ids.size() == 1);
    std::atomic<bool> spinning{false};
    std::thread spinner([&] {
      spinning = true;
      while (!stop.load()) {
      }
    });
    while (!spinning.load()) std::this_thread::yield();
    CHECK(team_threads_running());  // one of them spins
    {
      std::lock_guard<std::mutex> lock(mutex);
      stop = true;
    }
    woken.notify_all();
    sleeper.join();
    spinner.join();
  });
  executor.join();
  // Threads of another name are not the caller's team: the one above spun
  // and ended; a spinning thread with the caller's default name would count,
  // so this one renames itself first.
  std::atomic<bool> stop{false};
  std::atomic<bool> renamed{false};
  std::thread other([&] {
    pthread_setname_np(pthread_self(), "someone-else");
    renamed = true;
    while (!stop.load()) {
    }
  });
  while (!renamed.load()) std::this_thread::yield();
  CHECK(!team_threads_running());
  stop = true;
  other.join();
}

// A thread's CPUs, as the scheduler holds them.
cpu_set_t cpus_of(pid_t thread) {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  CHECK(sched_getaffinity(thread, sizeof cpus, &cpus) == 0);
  return cpus;
}

void test_team_placement() {
  // A sleeping thread stands in for a parked team's; the steering thread for
  // the executor, kept on one CPU so that "its current CPU" holds still.
  std::mutex mutex;
  std::condition_variable woken;
  bool stop = false;
  pid_t sleeper_id = 0;
  std::thread sleeper([&] {
    std::unique_lock<std::mutex> lock(mutex);
    sleeper_id = pid_t(syscall(SYS_gettid));
    woken.notify_all();
    woken.wait(lock, [&] { return stop; });
  });
  {
    std::unique_lock<std::mutex> lock(mutex);
    woken.wait(lock, [&] { return sleeper_id != 0; });
  }
  const cpu_set_t all = cpus_of(0);
  std::thread executor([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    int own = 0;
    while (!CPU_ISSET(own, &all)) ++own;
    CPU_SET(own, &one);
    CHECK(sched_setaffinity(0, sizeof one, &one) == 0);
    mydev_sim::TeamPlacement placement;
    placement.steer_away({sleeper_id});
    const cpu_set_t steered = cpus_of(sleeper_id);
    if (CPU_COUNT(&all) > 1) {
      // Every CPU it had but the executor's.
      cpu_set_t expected = all;
      CPU_CLR(own, &expected);
      CHECK(CPU_EQUAL(&steered, &expected));
    } else {
      CHECK(CPU_EQUAL(&steered, &all));  // no other CPU: left as it was
    }
    placement.restore();
    const cpu_set_t restored = cpus_of(sleeper_id);
    CHECK(CPU_EQUAL(&restored, &all));
    // A thread that may run on the executor's CPU only keeps it.
    CHECK(sched_setaffinity(sleeper_id, sizeof one, &one) == 0);
    placement.steer_away({sleeper_id});
    const cpu_set_t kept = cpus_of(sleeper_id);
    CHECK(CPU_EQUAL(&kept, &one));
    placement.restore();
    CHECK(sched_setaffinity(sleeper_id, sizeof all, &all) == 0);
    // A thread that has ended is passed over.
    placement.steer_away({pid_t(-1)});
    placement.restore();
  });
  executor.join();
  {
    std::lock_guard<std::mutex> lock(mutex);
    stop = true;
  }
  woken.notify_all();
  sleeper.join();
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "--child-launch-blocking") return child_launch_blocking();
  if (mode == "--child-bad-config") return child_bad_config();
  if (mode == "--child-defaults") return child_defaults();
  if (mode == "--child-zero-devices") return child_zero_devices();
  if (mode == "--child-exit-with-work") return child_exit_with_work();
  if (mode == "--child-fork-before-init") return child_fork_before_init();
  if (mode == "--child-ipc") return child_ipc();
  if (mode == "--child-host-dereference") return child_host_dereference();
  if (mode == "--child-illegal-address") return child_illegal_address();

  // Read once, at the first runtime call below.
  setenv("MYDEV_DEVICE_COUNT", "2", 1);
  setenv("MYDEV_MEMORY_MB", "256", 1);
  unsetenv("MYDEV_LAUNCH_BLOCKING");

  struct Case {
    const char* name;
    void (*run)();
  };
  const bool skip_latency = mode == "--no-latency";
  const Case cases[] = {
      {"devices", test_devices},
      {"malloc/free", test_malloc_free},
      {"pointer attributes", test_pointer_attributes},
      {"address space", test_address_space},
      {"virtual memory", test_virtual_memory},
      {"streams and ordering", test_streams_and_ordering},
      {"synchronize wake-ups", test_synchronize_wakeups},
      {"events", test_events},
      {"wait event across streams", test_wait_event_across_streams},
      {"kernel failure", test_kernel_failure},
      {"memcpy", test_memcpy},
      {"concurrent launches", test_concurrent_launches},
      {"priority gate", test_priority_gate},
      {"fork child refusal", test_fork_child_refusal},
      {"child processes", test_child_processes},
      {"peer memory", test_peer_memory},
      {"kernel team size", test_kernel_team_size},
      {"team spin", test_team_spin},
      {"team threads", test_team_threads},
      {"team placement", test_team_placement},
      {"latency", skip_latency ? nullptr : measure_latency},
  };
  for (const Case& c : cases) {
    if (c.run == nullptr) continue;
    const int failed_before = g_failed;
    const auto start = Clock::now();
    c.run();
    std::printf("%-28s %s (%.0f ms)\n", c.name,
                g_failed == failed_before ? "ok" : "FAILED", ms_since(start));
    std::fflush(stdout);
  }
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}
