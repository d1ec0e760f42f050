// An owning, move-only driver event: record on a stream, make another stream
// wait for it, or ask whether the work it captured is done.
#pragma once

#include <utility>

#include "mydev_stream.h"

namespace mydev {

class MydevEvent {
 public:
  explicit MydevEvent(unsigned flags = mydevEventDisableTiming);
  MydevEvent(MydevEvent&& other) noexcept
      : event_(std::exchange(other.event_, nullptr)) {}
  MydevEvent& operator=(MydevEvent&& other) noexcept {
    std::swap(event_, other.event_);
    return *this;
  }
  MydevEvent(const MydevEvent&) = delete;
  MydevEvent& operator=(const MydevEvent&) = delete;
  ~MydevEvent();

  void record(const MydevStream& stream);
  // Work enqueued on `stream` from now on waits for the recorded work.
  void block(const MydevStream& stream) const;
  bool query() const;
  void synchronize() const;

 private:
  mydevEvent_t event_ = nullptr;
};

}  // namespace mydev
