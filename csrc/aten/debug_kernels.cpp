#include "debug_kernels.h"

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

#include "kernel_launch.h"

namespace mydev {

void sleepOnCurrentStream(int64_t milliseconds) {
  TORCH_CHECK(milliseconds >= 0, "_sleep: milliseconds must be >= 0, got ",
              milliseconds);
  launchKernel("_sleep", [milliseconds] {
    std::this_thread::sleep_for(std::chrono::milliseconds(milliseconds));
  });
}

void failOnCurrentStream(const char* message) {
  launchKernel("_fail", [text = std::string(message)] {
    throw std::runtime_error(text);
  });
}

}  // namespace mydev
