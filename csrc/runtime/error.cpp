#include "error.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace mydev_sim {
namespace {

// A plain array, not a std::string: thread-local objects with destructors
// die before the process's static destructors run, and those (e.g. a
// caching allocator above us destroying its events) still call into the
// driver during exit.
constexpr size_t kMessageCapacity = 4096;
thread_local char t_last_message[kMessageCapacity];

void set_last_message(const std::string& text) {
  const size_t length = std::min(text.size(), kMessageCapacity - 1);
  std::memcpy(t_last_message, text.data(), length);
  t_last_message[length] = '\0';
}

std::string vformat(const char* fmt, va_list args) {
  va_list measure;
  va_copy(measure, args);
  const int length = std::vsnprintf(nullptr, 0, fmt, measure);
  va_end(measure);
  if (length <= 0) return std::string();
  std::string text(static_cast<size_t>(length), '\0');
  std::vsnprintf(&text[0], text.size() + 1, fmt, args);
  return text;
}

}  // namespace

std::string format(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  std::string text = vformat(fmt, args);
  va_end(args);
  return text;
}

mydevError_t fail(mydevError_t code, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  set_last_message(vformat(fmt, args));
  va_end(args);
  return code;
}

mydevError_t fail_with(mydevError_t code, std::string message) {
  set_last_message(message);
  return code;
}

void clear_last_error() { t_last_message[0] = '\0'; }

}  // namespace mydev_sim

extern "C" {

const char* mydevGetErrorString(mydevError_t error) {
  switch (error) {
    case mydevSuccess: return "no error";
    case mydevErrorInvalidValue: return "invalid argument";
    case mydevErrorInvalidDevice: return "invalid device ordinal";
    case mydevErrorMemoryAllocation: return "out of memory";
    case mydevErrorNotReady: return "device not ready";
    case mydevErrorLaunchFailure: return "kernel launch failure";
    case mydevErrorInvalidHandle: return "invalid resource handle";
    case mydevErrorNotPermitted: return "operation not permitted";
    case mydevErrorInitialization: return "initialization error";
    case mydevErrorPeerAccessUnsupported: return "cannot map peer memory";
    case mydevErrorIllegalAddress:
      return "an illegal memory access was encountered";
    case mydevErrorStreamCaptureUnsupported:
      return "operation not permitted when stream is capturing";
    case mydevErrorStreamCaptureInvalidated:
      return "operation failed due to a previous error during capture";
    case mydevErrorStreamCaptureUnjoined:
      return "capturing stream has unjoined work";
  }
  return "unknown mydev error";
}

const char* mydevGetLastErrorMessage(void) { return mydev_sim::t_last_message; }

}  // extern "C"
