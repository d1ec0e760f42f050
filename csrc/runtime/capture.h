// Stream capture (mydevStreamBeginCapture ... mydevStreamEndCapture): the
// state of a capture in progress, the rules for what may run during one,
// and the recorded work that graphs and their launches share.
//
// A capturing stream hands every task Stream::enqueue gets to its Capture
// instead of its ring. Event records and waits never become tasks during a
// capture (event.cpp): a record marks the event as captured, and a stream
// waiting on a captured event joins the capture. The recorded work is run
// later in submission order by one kernel (graph.cpp).
//
// Submission order would run a graph correctly even if a joined stream's
// work were never joined back, but CUDA refuses to end such a capture
// (cudaErrorStreamCaptureUnjoined), so the driver checks it too: a capture
// that works on mydev then works on a GPU. Each stream in the capture has a
// CaptureClock (event.h); recording a task advances its own entry, waiting
// on an event recorded in the capture merges that record's clock, and the
// end requires the origin's clock to cover every stream's recorded tasks.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "event.h"
#include "mydev_runtime.h"
#include "stream.h"

namespace mydev_sim {

// What a graph replays: kernels (from mydevLaunchKernelEx), copies and
// fills, in submission order. Shared by the graph, its executable graphs and
// the launches in flight; the last owner releases the kernels' data.
struct GraphNodes {
  GraphNodes() = default;
  GraphNodes(const GraphNodes&) = delete;
  GraphNodes& operator=(const GraphNodes&) = delete;
  ~GraphNodes();

  int device = -1;
  std::vector<Task> tasks;
  std::vector<uintptr_t> streams;  // the submitting stream, per task (dumps)
};

class Capture {
 public:
  Capture(uint64_t id, mydevStreamCaptureMode mode, Stream* origin);
  ~Capture();

  const uint64_t id;
  const mydevStreamCaptureMode mode;
  const std::thread::id thread;  // the thread that began it
  Stream* const origin;

  std::mutex mutex;  // guards everything below
  std::shared_ptr<GraphNodes> nodes;
  std::vector<Stream*> joined;  // other streams recording into it, retained
  std::map<const Stream*, CaptureClock> clocks;  // of the origin and joined
  std::string invalid_reason;                    // empty while valid
};

// Stream::enqueue's path for a capturing stream.
void capture_record(Capture* capture, const Task& task, Stream* stream);

// For a call that would wait for or query `stream`: refused, and the capture
// invalidated, if the stream is capturing.
mydevError_t refuse_if_capturing(Stream* stream, const char* api);
// For a potentially unsafe call (device synchronize, synchronizing another
// stream or an event): refused by the rules of the captures in progress
// (mydev_runtime.h), which are invalidated.
mydevError_t refuse_if_unsafe(const char* api);

// The capture in progress with this id, or nullptr (it ended). Callers hold
// no capture lock; the pointer is valid until that capture ends, which only
// its origin stream's owner does.
Capture* find_capture(uint64_t id);
// The clock of `stream`, which records into `capture`, for an event record.
CaptureClock capture_clock(Capture* capture, const Stream* stream);
// `stream` waits on work recorded in `capture` up to `clock`: it records
// into it too until the capture ends, and follows that work.
mydevError_t join_capture(Capture* capture, Stream* stream,
                          const CaptureClock& clock);
// Refuses the call `api` in `capture` and invalidates it (message kept for
// the end call).
mydevError_t invalidate(Capture* capture, const char* api, const char* why);

mydevError_t begin_capture(Stream* stream, mydevStreamCaptureMode mode);
// *nodes receives the recorded work, or nullptr if the capture was
// invalidated (then mydevErrorStreamCaptureInvalidated with the reason) or
// a joined stream's work was not joined back into the origin
// (mydevErrorStreamCaptureUnjoined naming the streams).
mydevError_t end_capture(Stream* stream, std::shared_ptr<GraphNodes>* nodes);

}  // namespace mydev_sim
