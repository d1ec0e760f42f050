#include "event.h"

#include <mutex>

#include "capture.h"
#include "device.h"
#include "error.h"
#include "lifecycle.h"
#include "stream.h"

namespace mydev_sim {

EventRecord::EventRecord(Stream* recorded_on) : stream(recorded_on) {
  stream->retain();
}

EventRecord::~EventRecord() { stream->release(); }

bool EventRecord::reached() const { return stream->completed() >= sequence; }

void EventRecord::release() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

namespace {

constexpr uint32_t kLiveMagic = 0x6d796465;
constexpr uint32_t kDeadMagic = 0xdead5e17;

class Event {
 public:
  explicit Event(unsigned flags) : flags_(flags) {}
  ~Event() {
    magic_.store(kDeadMagic, std::memory_order_relaxed);
    if (record_ != nullptr) record_->release();
  }

  static Event* from_handle(mydevEvent_t handle) {
    return reinterpret_cast<Event*>(handle);
  }
  mydevEvent_t handle() { return reinterpret_cast<mydevEvent_t>(this); }
  bool valid() const {
    return magic_.load(std::memory_order_relaxed) == kLiveMagic;
  }
  bool timing() const { return (flags_ & mydevEventDisableTiming) == 0; }
  bool blocking_sync() const { return (flags_ & mydevEventBlockingSync) != 0; }

  // The current record, retained, or nullptr if never recorded.
  EventRecord* current() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (record_ != nullptr) record_->retain();
    return record_;
  }

  void replace(EventRecord* record) {
    EventRecord* old;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      old = record_;
      record_ = record;
    }
    if (old != nullptr) old->release();
  }

 private:
  std::atomic<uint32_t> magic_{kLiveMagic};
  const unsigned flags_;
  std::mutex mutex_;
  EventRecord* record_ = nullptr;
};

// Releases the retained record at scope exit.
struct RecordRef {
  EventRecord* record;
  explicit RecordRef(EventRecord* r) : record(r) {}
  ~RecordRef() {
    if (record != nullptr) record->release();
  }
  RecordRef(const RecordRef&) = delete;
  RecordRef& operator=(const RecordRef&) = delete;
};

// Synchronizing or querying an event: refused for one recorded in a capture
// still in progress (its work does not exist until a replay), and subject to
// the unsafe-call rules otherwise.
mydevError_t refuse_during_capture(const EventRecord* record, const char* api) {
  if (record != nullptr && record->capture_id != 0) {
    if (Capture* capture = find_capture(record->capture_id)) {
      return invalidate(capture, api,
                        "the event was recorded in the capture in progress");
    }
  }
  return refuse_if_unsafe(api);
}

mydevError_t resolve_event(mydevEvent_t handle, Event** out) {
  Event* event = Event::from_handle(handle);
  if (event == nullptr || !event->valid()) {
    return fail(mydevErrorInvalidHandle,
                "%p is not a valid mydev event (destroyed?)",
                static_cast<void*>(handle));
  }
  *out = event;
  return mydevSuccess;
}

}  // namespace
}  // namespace mydev_sim

using namespace mydev_sim;

extern "C" {

mydevError_t mydevEventCreate(mydevEvent_t* event, unsigned flags) {
  if (mydevError_t status = enter()) return status;
  if (event == nullptr) {
    return fail(mydevErrorInvalidValue, "mydevEventCreate: event is null");
  }
  constexpr unsigned kKnownFlags =
      mydevEventDisableTiming | mydevEventBlockingSync;
  if ((flags & ~kKnownFlags) != 0) {
    return fail(mydevErrorInvalidValue, "mydevEventCreate: unknown flags 0x%x",
                flags);
  }
  *event = (new Event(flags))->handle();
  return mydevSuccess;
}

mydevError_t mydevEventDestroy(mydevEvent_t handle) {
  if (mydevError_t status = enter()) return status;
  Event* event = nullptr;
  if (mydevError_t status = resolve_event(handle, &event)) return status;
  // A pending record stays alive through the reference its marker holds.
  delete event;
  return mydevSuccess;
}

mydevError_t mydevEventRecord(mydevEvent_t handle,
                              mydevStream_t stream_handle) {
  if (mydevError_t status = enter()) return status;
  Event* event = nullptr;
  if (mydevError_t status = resolve_event(handle, &event)) return status;
  Stream* stream = nullptr;
  if (mydevError_t status = resolve_stream(stream_handle, &stream)) {
    return status;
  }
  auto* record = new EventRecord(stream);
  if (Capture* capture = stream->capture()) {
    // Nothing runs during a capture: the record is the capture's position,
    // which streams waiting on it join (fork/join, as on CUDA).
    record->sequence = stream->enqueued();
    record->capture_id = capture->id;
    record->capture_clock = capture_clock(capture, stream);
  } else if (event->timing()) {
    record->retain();  // the marker's reference
    record->sequence = stream->enqueue(Task::marker(record));
  } else {
    // Without timing there is nothing to run: the stream's progress past
    // this point is all the event needs.
    record->sequence = stream->enqueued();
  }
  event->replace(record);
  return mydevSuccess;
}

mydevError_t mydevEventQuery(mydevEvent_t handle) {
  if (mydevError_t status = enter()) return status;
  Event* event = nullptr;
  if (mydevError_t status = resolve_event(handle, &event)) return status;
  RecordRef ref(event->current());
  if (mydevError_t status =
          refuse_during_capture(ref.record, "mydevEventQuery")) {
    return status;
  }
  if (ref.record == nullptr || ref.record->reached()) return mydevSuccess;
  return fail(mydevErrorNotReady,
              "mydevEventQuery: the event's work has not "
              "completed yet");
}

mydevError_t mydevEventSynchronize(mydevEvent_t handle) {
  if (mydevError_t status = enter()) return status;
  Event* event = nullptr;
  if (mydevError_t status = resolve_event(handle, &event)) return status;
  RecordRef ref(event->current());
  if (mydevError_t status =
          refuse_during_capture(ref.record, "mydevEventSynchronize")) {
    return status;
  }
  if (ref.record == nullptr) return mydevSuccess;
  ref.record->stream->wait(ref.record->sequence, !event->blocking_sync());
  return ref.record->stream->device()->report_failure();
}

mydevError_t mydevStreamWaitEvent(mydevStream_t stream_handle,
                                  mydevEvent_t handle) {
  if (mydevError_t status = enter()) return status;
  Stream* stream = nullptr;
  if (mydevError_t status = resolve_stream(stream_handle, &stream)) {
    return status;
  }
  Event* event = nullptr;
  if (mydevError_t status = resolve_event(handle, &event)) return status;
  EventRecord* record = event->current();
  if (record != nullptr && record->capture_id != 0) {
    Capture* capture = find_capture(record->capture_id);
    const mydevError_t status =
        capture != nullptr
            ? join_capture(capture, stream, record->capture_clock)
            : mydevSuccess;
    record->release();
    return status;
  }
  if (Capture* capture = stream->capture()) {
    // Work outside the capture cannot be a dependency of a replay.
    if (record != nullptr && !record->reached()) {
      record->release();
      return invalidate(capture, "mydevStreamWaitEvent",
                        "the capturing stream waits on work enqueued "
                        "outside the capture that has not completed");
    }
    if (record != nullptr) record->release();
    return mydevSuccess;
  }
  // Nothing to wait for: never recorded, already reached, or recorded on
  // this very stream, whose order already implies it.
  if (record == nullptr || record->reached() || record->stream == stream) {
    if (record != nullptr) record->release();
    return mydevSuccess;
  }
  stream->enqueue(Task::wait_event(record));  // the task owns the reference
  return mydevSuccess;
}

mydevError_t mydevEventElapsedTime(float* ms, mydevEvent_t start_handle,
                                   mydevEvent_t end_handle) {
  if (mydevError_t status = enter()) return status;
  if (ms == nullptr) {
    return fail(mydevErrorInvalidValue, "mydevEventElapsedTime: ms is null");
  }
  Event* start = nullptr;
  Event* end = nullptr;
  if (mydevError_t status = resolve_event(start_handle, &start)) return status;
  if (mydevError_t status = resolve_event(end_handle, &end)) return status;
  if (!start->timing() || !end->timing()) {
    return fail(mydevErrorInvalidValue,
                "mydevEventElapsedTime: both events must be created without "
                "mydevEventDisableTiming");
  }
  RecordRef start_ref(start->current());
  RecordRef end_ref(end->current());
  if (start_ref.record == nullptr || end_ref.record == nullptr) {
    return fail(mydevErrorInvalidValue,
                "mydevEventElapsedTime: both events must have been recorded");
  }
  if (!start_ref.record->reached() || !end_ref.record->reached()) {
    return fail(mydevErrorNotReady,
                "mydevEventElapsedTime: an event has not completed yet");
  }
  const int64_t nanoseconds =
      end_ref.record->time_ns.load(std::memory_order_relaxed) -
      start_ref.record->time_ns.load(std::memory_order_relaxed);
  *ms = float(double(nanoseconds) / 1e6);
  return mydevSuccess;
}

}  // extern "C"
