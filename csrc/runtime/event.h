// Events. Each record is its own reference-counted state, shared by the
// event and by the tasks it put on streams, so that a marker of an earlier
// record can never touch a newer one, and destroying a pending event is safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>

namespace mydev_sim {

class Stream;

// A stream's place in a capture (capture.h): for each stream recording into
// it, how many of that stream's recorded tasks come before this point.
using CaptureClock = std::map<const Stream*, uint64_t>;

struct EventRecord {
  // Retains `stream`; `sequence` is set before the record is published.
  explicit EventRecord(Stream* stream);
  EventRecord(const EventRecord&) = delete;
  EventRecord& operator=(const EventRecord&) = delete;

  bool reached() const;
  void retain() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void release();

  Stream* const stream;
  uint64_t sequence = 0;
  // Nonzero for a record made while its stream was capturing: the id of
  // that capture (capture.h). Streams waiting on it join the capture.
  uint64_t capture_id = 0;
  // And the recording stream's clock then: what a waiting stream follows.
  CaptureClock capture_clock;
  // steady_clock nanoseconds, stored by the marker task before the stream's
  // completed count makes it visible.
  std::atomic<int64_t> time_ns{0};

 private:
  ~EventRecord();
  std::atomic<int> refs_{1};
};

}  // namespace mydev_sim
