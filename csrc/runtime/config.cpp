#include "config.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "error.h"

namespace mydev_sim {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr long long kMaxDevices = 64;
constexpr long long kMinDefaultMemoryMiB = 256;
// The smallest memory that holds one allocation: torch-mydev's caching
// allocator maps device memory in segments of at least 2 MiB, so a smaller
// device could not hold even a one-byte tensor.
constexpr long long kMinMemoryMiB = 2;
// 1 TiB per device: beyond any host. The address space reserves several
// times each device's capacity (address_space.h); a configuration whose
// reservation does not fit the 47-bit user address space fails at
// initialisation with a message saying so.
constexpr long long kMaxMemoryMiB = 1ll << 20;

// Unset and empty both mean "use the default".
const char* env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && value[0] != '\0' ? value : nullptr;
}

bool parse_integer(const char* text, long long low, long long high,
                   long long* out) {
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || value < low ||
      value > high) {
    return false;
  }
  *out = value;
  return true;
}

size_t default_memory_bytes(int device_count) {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  const size_t ram =
      pages > 0 && page_size > 0 ? size_t(pages) * size_t(page_size) : 0;
  const size_t share = ram / 4 / size_t(std::max(device_count, 1));
  return std::max(share / kMiB, size_t(kMinDefaultMemoryMiB)) * kMiB;
}

}  // namespace

mydevError_t read_config(Config* config, std::string* error) {
  long long value = 0;
  if (const char* text = env("MYDEV_DEVICE_COUNT")) {
    if (!parse_integer(text, 0, kMaxDevices, &value)) {
      *error = format(
          "MYDEV_DEVICE_COUNT='%s' is invalid: expected an "
          "integer from 0 to %lld",
          text, kMaxDevices);
      return mydevErrorInitialization;
    }
    config->device_count = int(value);
  }

  config->memory_bytes = default_memory_bytes(config->device_count);
  if (const char* text = env("MYDEV_MEMORY_MB")) {
    if (!parse_integer(text, kMinMemoryMiB, kMaxMemoryMiB, &value)) {
      *error = format(
          "MYDEV_MEMORY_MB='%s' is invalid: expected an integer "
          "number of MiB from %lld (the smallest memory that "
          "holds one allocation) to %lld",
          text, kMinMemoryMiB, kMaxMemoryMiB);
      return mydevErrorInitialization;
    }
    config->memory_bytes = size_t(value) * kMiB;
  }

  if (const char* text = env("MYDEV_LAUNCH_BLOCKING")) {
    if (!parse_integer(text, 0, 1, &value)) {
      *error = format("MYDEV_LAUNCH_BLOCKING='%s' is invalid: expected 0 or 1",
                      text);
      return mydevErrorInitialization;
    }
    config->launch_blocking = value == 1;
  }

  if (const char* text = env("MYDEV_PEER_MEMORY")) {
    if (!parse_integer(text, 0, 1, &value)) {
      *error =
          format("MYDEV_PEER_MEMORY='%s' is invalid: expected 0 or 1", text);
      return mydevErrorInitialization;
    }
    config->peer_memory = value == 1;
  }

  if (const char* text = env("MYDEV_DYNAMIC_THREADS")) {
    if (!parse_integer(text, 0, 1, &value)) {
      *error = format("MYDEV_DYNAMIC_THREADS='%s' is invalid: expected 0 or 1",
                      text);
      return mydevErrorInitialization;
    }
    config->dynamic_threads = value == 1;
  }
  return mydevSuccess;
}

}  // namespace mydev_sim
