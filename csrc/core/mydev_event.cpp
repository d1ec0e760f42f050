#include "mydev_event.h"

#include "runtime_check.h"

namespace mydev {

MydevEvent::MydevEvent(unsigned flags) {
  MYDEV_CHECK(mydevEventCreate(&event_, flags));
}

MydevEvent::~MydevEvent() {
  if (event_ != nullptr) {
    (void)mydevEventDestroy(event_);
  }
}

void MydevEvent::record(const MydevStream& stream) {
  MYDEV_CHECK(mydevEventRecord(event_, stream.raw()));
}

void MydevEvent::block(const MydevStream& stream) const {
  MYDEV_CHECK(mydevStreamWaitEvent(stream.raw(), event_));
}

bool MydevEvent::query() const {
  const mydevError_t status = mydevEventQuery(event_);
  if (status == mydevErrorNotReady) {
    return false;
  }
  MYDEV_CHECK(status);
  return true;
}

void MydevEvent::synchronize() const {
  MYDEV_CHECK(mydevEventSynchronize(event_));
}

}  // namespace mydev
