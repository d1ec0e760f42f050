#include "runtime_check.h"

#include <string>

namespace mydev {

void throwRuntimeError(mydevError_t error, const char* expr, const char* file,
                       int line) {
  std::string detail = mydevGetLastErrorMessage();
  if (detail.empty()) {
    detail = mydevGetErrorString(error);
  }
  // The call site is for vendor debugging; users read the driver's message.
  const std::string where =
      std::string(" (") + expr + " at " + file + ":" + std::to_string(line) + ")";
  if (error == mydevErrorMemoryAllocation) {
    TORCH_CHECK_WITH(OutOfMemoryError, false, detail);
  }
  TORCH_CHECK(false, "mydev error: ", detail, where);
}

}  // namespace mydev
