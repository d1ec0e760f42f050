#include "capture.h"

#include <algorithm>
#include <atomic>

#include "device.h"
#include "error.h"
#include "event.h"

namespace mydev_sim {
namespace {

std::atomic<uint64_t> g_next_capture_id{1};
// How many captures are in progress: the unsafe-call check costs one relaxed
// load when none is.
std::atomic<int> g_capture_count{0};

struct Registry {
  std::mutex mutex;
  std::vector<Capture*> captures;
};

Registry& registry() {
  // Leaked: streams may still be enqueueing while the process exits.
  static auto* instance = new Registry;
  return *instance;
}

const char* mode_name(mydevStreamCaptureMode mode) {
  switch (mode) {
    case mydevStreamCaptureModeGlobal: return "global";
    case mydevStreamCaptureModeThreadLocal: return "thread_local";
    case mydevStreamCaptureModeRelaxed: return "relaxed";
  }
  return "invalid";
}

void mark_invalid(Capture* capture, const std::string& reason) {
  std::lock_guard<std::mutex> lock(capture->mutex);
  if (capture->invalid_reason.empty()) capture->invalid_reason = reason;
}

// Merges what `stream` now follows into its clock (capture->mutex held).
void follow(Capture* capture, const Stream* stream, const CaptureClock& clock) {
  CaptureClock& own = capture->clocks[stream];
  for (const auto& [other, count] : clock) {
    own[other] = std::max(own[other], count);
  }
}

// The joined streams whose recorded work the origin does not follow, as
// "0x..., 0x..." (capture->mutex held); empty when all were joined back.
std::string unjoined_streams(Capture* capture) {
  const CaptureClock& origin = capture->clocks[capture->origin];
  std::string names;
  for (const Stream* stream : capture->joined) {
    const auto own = capture->clocks[stream].find(stream);
    if (own == capture->clocks[stream].end()) continue;  // recorded nothing
    const auto seen = origin.find(stream);
    if (seen != origin.end() && seen->second >= own->second) continue;
    if (!names.empty()) names += ", ";
    names += format("%p", static_cast<const void*>(stream));
  }
  return names;
}

}  // namespace

GraphNodes::~GraphNodes() {
  for (const Task& task : tasks) {
    if (task.kind == TaskKind::Kernel && task.release != nullptr) {
      task.release(task.dst);
    }
  }
}

Capture::Capture(uint64_t capture_id, mydevStreamCaptureMode capture_mode,
                 Stream* origin_stream)
    : id(capture_id),
      mode(capture_mode),
      thread(std::this_thread::get_id()),
      origin(origin_stream),
      nodes(std::make_shared<GraphNodes>()) {
  nodes->device = origin->device()->index();
}

Capture::~Capture() {
  for (Stream* stream : joined) stream->release();
}

void capture_record(Capture* capture, const Task& task, Stream* stream) {
  std::lock_guard<std::mutex> lock(capture->mutex);
  if (!capture->invalid_reason.empty()) {
    // The capture is dead; the end call reports why. The work is dropped
    // as a failed capture drops it on CUDA.
    if (task.kind == TaskKind::Kernel && task.release != nullptr) {
      task.release(task.dst);
    }
    return;
  }
  Task recorded = task;
  recorded.activity = nullptr;  // replays leave their own record
  capture->nodes->tasks.push_back(recorded);
  capture->nodes->streams.push_back(reinterpret_cast<uintptr_t>(stream));
  capture->clocks[stream][stream] += 1;
}

CaptureClock capture_clock(Capture* capture, const Stream* stream) {
  std::lock_guard<std::mutex> lock(capture->mutex);
  return capture->clocks[stream];
}

mydevError_t invalidate(Capture* capture, const char* api, const char* why) {
  std::string message = format(
      "%s: %s, which is not permitted while mydev:%d's stream %p is "
      "capturing a graph (capture %llu, mode %s); the capture is "
      "invalidated",
      api, why, capture->origin->device()->index(),
      static_cast<void*>(capture->origin->handle()),
      static_cast<unsigned long long>(capture->id), mode_name(capture->mode));
  mark_invalid(capture, message);
  return fail_with(mydevErrorStreamCaptureUnsupported, std::move(message));
}

mydevError_t refuse_if_capturing(Stream* stream, const char* api) {
  Capture* capture = stream->capture();
  if (capture == nullptr) return mydevSuccess;
  return invalidate(capture, api,
                    "it would wait for a capturing stream (a synchronize, a "
                    "blocking copy or .item())");
}

mydevError_t refuse_if_unsafe(const char* api) {
  if (g_capture_count.load(std::memory_order_relaxed) == 0) {
    return mydevSuccess;
  }
  const std::thread::id self = std::this_thread::get_id();
  std::vector<Capture*> prohibiting;
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    for (Capture* capture : registry().captures) {
      const bool own = capture->thread == self;
      if ((own && capture->mode != mydevStreamCaptureModeRelaxed) ||
          (!own && capture->mode == mydevStreamCaptureModeGlobal)) {
        prohibiting.push_back(capture);
      }
    }
  }
  mydevError_t status = mydevSuccess;
  for (Capture* capture : prohibiting) {
    status = invalidate(capture, api,
                        "it is a potentially unsafe call (it synchronizes)");
  }
  return status;
}

Capture* find_capture(uint64_t id) {
  std::lock_guard<std::mutex> lock(registry().mutex);
  for (Capture* capture : registry().captures) {
    if (capture->id == id) return capture;
  }
  return nullptr;
}

mydevError_t join_capture(Capture* capture, Stream* stream,
                          const CaptureClock& clock) {
  Capture* current = stream->capture();
  if (current == capture) {
    std::lock_guard<std::mutex> lock(capture->mutex);
    follow(capture, stream, clock);
    return mydevSuccess;
  }
  if (current != nullptr) {
    return invalidate(capture, "mydevStreamWaitEvent",
                      "a stream capturing another graph waits on its event");
  }
  if (stream->is_default()) {
    return invalidate(capture, "mydevStreamWaitEvent",
                      "the default stream waits on an event recorded during "
                      "the capture (the default stream cannot be captured)");
  }
  if (stream->device() != capture->origin->device()) {
    return invalidate(capture, "mydevStreamWaitEvent",
                      "a stream of another device waits on its event");
  }
  {
    std::lock_guard<std::mutex> lock(capture->mutex);
    stream->retain();
    capture->joined.push_back(stream);
    follow(capture, stream, clock);
  }
  stream->set_capture(capture);
  return mydevSuccess;
}

mydevError_t begin_capture(Stream* stream, mydevStreamCaptureMode mode) {
  if (mode < mydevStreamCaptureModeGlobal ||
      mode > mydevStreamCaptureModeRelaxed) {
    return fail(mydevErrorInvalidValue,
                "mydevStreamBeginCapture: invalid capture mode %d", int(mode));
  }
  if (stream->is_default()) {
    return fail(mydevErrorStreamCaptureUnsupported,
                "mydevStreamBeginCapture: capture on the default stream of "
                "mydev:%d is not permitted; capture on a stream created "
                "with mydevStreamCreate (in torch, a torch.mydev.Stream())",
                stream->device()->index());
  }
  if (stream->capture() != nullptr) {
    return fail(mydevErrorStreamCaptureUnsupported,
                "mydevStreamBeginCapture: stream %p of mydev:%d is already "
                "capturing",
                static_cast<void*>(stream->handle()),
                stream->device()->index());
  }
  auto* capture = new Capture(
      g_next_capture_id.fetch_add(1, std::memory_order_relaxed), mode, stream);
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    registry().captures.push_back(capture);
  }
  g_capture_count.fetch_add(1, std::memory_order_relaxed);
  stream->set_capture(capture);
  return mydevSuccess;
}

mydevError_t end_capture(Stream* stream, std::shared_ptr<GraphNodes>* nodes) {
  Capture* capture = stream->capture();
  if (capture == nullptr) {
    return fail(mydevErrorInvalidValue,
                "mydevStreamEndCapture: stream %p of mydev:%d is not "
                "capturing",
                static_cast<void*>(stream->handle()),
                stream->device()->index());
  }
  if (capture->origin != stream) {
    return fail(mydevErrorInvalidValue,
                "mydevStreamEndCapture: stream %p joined capture %llu; end "
                "it on the stream that began it (%p)",
                static_cast<void*>(stream->handle()),
                static_cast<unsigned long long>(capture->id),
                static_cast<void*>(capture->origin->handle()));
  }
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    auto& all = registry().captures;
    all.erase(std::remove(all.begin(), all.end(), capture), all.end());
  }
  g_capture_count.fetch_sub(1, std::memory_order_relaxed);
  stream->set_capture(nullptr);
  for (Stream* joined : capture->joined) joined->set_capture(nullptr);
  std::string reason;
  std::string unjoined;
  {
    std::lock_guard<std::mutex> lock(capture->mutex);
    reason = capture->invalid_reason;
    if (reason.empty()) unjoined = unjoined_streams(capture);
    if (reason.empty() && unjoined.empty()) {
      *nodes = std::move(capture->nodes);
    }
  }
  const uint64_t id = capture->id;
  delete capture;  // every stream is out of capture: all stay usable
  if (!reason.empty()) {
    *nodes = nullptr;
    return fail_with(mydevErrorStreamCaptureInvalidated, std::move(reason));
  }
  if (!unjoined.empty()) {
    *nodes = nullptr;
    return fail(mydevErrorStreamCaptureUnjoined,
                "mydevStreamEndCapture: capture %llu on mydev:%d's stream %p "
                "has unjoined work: stream(s) %s joined the capture and "
                "recorded work that the origin stream does not wait for. "
                "Join them back before ending the capture (record an event "
                "on each and make the origin stream wait on it; in torch, "
                "torch.mydev.current_stream().wait_stream(side)). The capture "
                "is invalidated",
                static_cast<unsigned long long>(id), stream->device()->index(),
                static_cast<void*>(stream->handle()), unjoined.c_str());
  }
  return mydevSuccess;
}

}  // namespace mydev_sim
