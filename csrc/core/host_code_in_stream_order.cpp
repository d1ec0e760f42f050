#include "host_code_in_stream_order.h"

#include <condition_variable>
#include <memory>
#include <mutex>

#include "runtime_check.h"

namespace mydev {
namespace {

// Shared by the host thread and the placeholder kernel: whichever finishes
// last frees it.
struct Handshake {
  std::mutex mutex;
  std::condition_variable changed;
  bool stream_reached = false;
  bool host_done = false;
};

void parkUntilHostDone(void* user_data) {
  const std::unique_ptr<std::shared_ptr<Handshake>> owned(
      static_cast<std::shared_ptr<Handshake>*>(user_data));
  Handshake& handshake = **owned;
  std::unique_lock<std::mutex> lock(handshake.mutex);
  handshake.stream_reached = true;
  handshake.changed.notify_all();
  handshake.changed.wait(lock, [&] { return handshake.host_done; });
}

// Lets the parked stream go on however `body` ends.
class ReleaseStreamOnExit {
 public:
  explicit ReleaseStreamOnExit(Handshake& handshake) : handshake_(handshake) {}
  ReleaseStreamOnExit(const ReleaseStreamOnExit&) = delete;
  ReleaseStreamOnExit& operator=(const ReleaseStreamOnExit&) = delete;
  ~ReleaseStreamOnExit() {
    std::lock_guard<std::mutex> lock(handshake_.mutex);
    handshake_.host_done = true;
    handshake_.changed.notify_all();
  }

 private:
  Handshake& handshake_;
};

}  // namespace

void runHostCodeInStreamOrder(mydevStream_t stream, const char* name,
                              const std::function<void()>& body) {
  if (mydevLaunchBlocking()) {
    // Every enqueue waits for its work here, the placeholder included, which
    // would wait for this thread. A synchronized stream is the same point in
    // its order, and launch blocking reports earlier failures here anyway.
    MYDEV_CHECK(mydevStreamSynchronize(stream));
    body();
    return;
  }
  auto handshake = std::make_shared<Handshake>();
  auto kernel_reference =
      std::make_unique<std::shared_ptr<Handshake>>(handshake);
  MYDEV_CHECK(mydevLaunchKernel(stream, name, &parkUntilHostDone,
                                kernel_reference.get()));
  kernel_reference.release();  // the placeholder owns it now
  ReleaseStreamOnExit release(*handshake);
  {
    std::unique_lock<std::mutex> lock(handshake->mutex);
    handshake->changed.wait(lock, [&] { return handshake->stream_reached; });
  }
  body();
}

}  // namespace mydev
