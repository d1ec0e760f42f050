#include "fault_handler.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "address_space.h"
#include "device.h"
#include "error.h"

namespace mydev_sim {

std::atomic<bool> g_illegal_access_pending{false};

namespace {

struct sigaction g_previous {};
// The first illegal access not reported yet: the faulting address, in the
// kernel half or the null window.
std::atomic<uintptr_t> g_illegal_address{0};

// Async-signal-safe formatting for the handler.
class Message {
 public:
  Message& text(const char* s) {
    while (*s != '\0' && length_ < sizeof(buffer_)) buffer_[length_++] = *s++;
    return *this;
  }
  Message& hex(uintptr_t value) {
    char digits[2 + 16];
    size_t n = 0;
    do {
      digits[n++] = "0123456789abcdef"[value & 15];
      value >>= 4;
    } while (value != 0);
    text("0x");
    while (n > 0 && length_ < sizeof(buffer_)) buffer_[length_++] = digits[--n];
    return *this;
  }
  Message& number(uintptr_t value) {
    char digits[20];
    size_t n = 0;
    do {
      digits[n++] = char('0' + value % 10);
      value /= 10;
    } while (value != 0);
    while (n > 0 && length_ < sizeof(buffer_)) buffer_[length_++] = digits[--n];
    return *this;
  }
  void write_to_stderr() const {
    size_t written = 0;
    while (written < length_) {
      const ssize_t n =
          write(STDERR_FILENO, buffer_ + written, length_ - written);
      if (n <= 0) return;
      written += size_t(n);
    }
  }

 private:
  char buffer_[512];
  size_t length_ = 0;
};

void explain_host_dereference(const AddressSpace& space, uintptr_t address) {
  const uintptr_t offset =
      address - reinterpret_cast<uintptr_t>(space.device_base);
  const uintptr_t slot = offset / space.slot_size;
  Message message;
  message.text("mydev: host code dereferenced device pointer ").hex(address);
  if (slot < uintptr_t(space.device_count)) {
    message.text(" (mydev:")
        .number(slot)
        .text(", offset ")
        .hex(offset % space.slot_size)
        .text(" in its device memory)");
  } else {
    message.text(" (memory of a peer process opened through IPC)");
  }
  message
      .text(
          ". Device memory is opaque to the host: reach it through a copy "
          "(tensor.cpu(), mydevMemcpy) or inside a kernel "
          "(mydevKernelPointer).\n")
      .write_to_stderr();
}

void chain(int signal, siginfo_t* info, void* context) {
  if (g_previous.sa_flags & SA_SIGINFO) {
    g_previous.sa_sigaction(signal, info, context);
    return;
  }
  if (g_previous.sa_handler == SIG_DFL || g_previous.sa_handler == SIG_IGN) {
    // The default action, as if this handler had never been there: a real
    // fault happens again when the instruction retries; a sent signal is
    // raised again (it is blocked until this handler returns).
    struct sigaction fallback {};
    fallback.sa_handler = SIG_DFL;
    sigemptyset(&fallback.sa_mask);
    sigaction(signal, &fallback, nullptr);
    if (info->si_code <= 0) raise(signal);
    return;
  }
  g_previous.sa_handler(signal);
}

// Maps a zero page of device page size at the faulting address, inside
// [region, region + size).
bool map_scratch(uintptr_t address, uintptr_t region, size_t size) {
  uintptr_t page = address & ~uintptr_t(kDevicePageSize - 1);
  if (page < region) page = region;
  size_t length = kDevicePageSize;
  if (page + length > region + size) length = region + size - page;
  return mmap(reinterpret_cast<void*>(page), length, PROT_READ | PROT_WRITE,
              MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED;
}

void on_fault(int signal, siginfo_t* info, void* context) {
  const AddressSpace* space = address_space();
  // si_code > 0: the kernel reports a fault (not a signal sent by kill).
  if (space != nullptr && info->si_code > 0) {
    const auto address = reinterpret_cast<uintptr_t>(info->si_addr);
    const auto kernel = reinterpret_cast<uintptr_t>(space->kernel_base);
    const auto device = reinterpret_cast<uintptr_t>(space->device_base);
    const auto null_window = reinterpret_cast<uintptr_t>(space->null_window);
    const bool in_kernel_half = address - kernel < space->size;
    const bool in_null_window = address - null_window < space->null_size;
    if (in_kernel_half || in_null_window) {
      const bool mapped =
          in_kernel_half ? map_scratch(address, kernel, space->size)
                         : map_scratch(address, null_window, space->null_size);
      if (mapped) {
        uintptr_t none = 0;
        if (g_illegal_address.compare_exchange_strong(none, address)) {
          g_illegal_access_pending.store(true, std::memory_order_release);
        }
        return;  // the access retries, on the scratch page
      }
    } else if (address - device < space->size) {
      explain_host_dereference(*space, address);
    }
  }
  chain(signal, info, context);
}

}  // namespace

void install_fault_handler() {
  struct sigaction action {};
  action.sa_sigaction = on_fault;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  sigaction(SIGSEGV, &action, &g_previous);
}

void take_illegal_access(Device* device, const char* work) {
  const uintptr_t address = g_illegal_address.load(std::memory_order_acquire);
  if (!g_illegal_access_pending.exchange(false) || address == 0) return;
  g_illegal_address.store(0, std::memory_order_release);
  const AddressSpace& space = *address_space();
  const auto kernel = reinterpret_cast<uintptr_t>(space.kernel_base);
  std::string where;
  if (address - kernel < space.size) {
    const uintptr_t offset = address - kernel;
    const uintptr_t device_address =
        reinterpret_cast<uintptr_t>(space.device_base) + offset;
    const uintptr_t slot = offset / space.slot_size;
    where = slot < uintptr_t(space.device_count)
                ? format(
                      "device address 0x%lx (mydev:%d, offset 0x%lx), which no "
                      "allocation maps (freed, or out of bounds?)",
                      (unsigned long)device_address, int(slot),
                      (unsigned long)(offset % space.slot_size))
                : format(
                      "device address 0x%lx of peer memory, which no opened "
                      "allocation maps",
                      (unsigned long)device_address);
  } else {
    const uintptr_t original =
        address - reinterpret_cast<uintptr_t>(space.null_window);
    where = format(
        "address 0x%lx, which is not a device address (a null "
        "pointer, or the storage of a tensor resized to 0?)",
        (unsigned long)original);
  }
  device->record_illegal_address(
      format("an illegal memory access was encountered: kernel '%s' on "
             "mydev:%d touched %s. The device is unusable until the process "
             "exits (as on CUDA).",
             work, device->index(), where.c_str()));
}

}  // namespace mydev_sim
