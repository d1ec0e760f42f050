// The stream and kernel-launch entry points; the queue itself is stream.cpp.
#include "activity.h"
#include "capture.h"
#include "device.h"
#include "error.h"
#include "lifecycle.h"
#include "stream.h"

using namespace mydev_sim;

extern "C" {

mydevError_t mydevDeviceGetStreamPriorityRange(int* least_priority,
                                               int* greatest_priority) {
  if (mydevError_t status = enter()) return status;
  if (least_priority == nullptr || greatest_priority == nullptr) {
    return fail(mydevErrorInvalidValue,
                "mydevDeviceGetStreamPriorityRange: null argument");
  }
  *least_priority = 0;
  *greatest_priority = -1;
  return mydevSuccess;
}

mydevError_t mydevStreamGetDefault(int device, mydevStream_t* stream) {
  if (mydevError_t status = enter()) return status;
  if (stream == nullptr) {
    return fail(mydevErrorInvalidValue,
                "mydevStreamGetDefault: stream is null");
  }
  Device* dev = nullptr;
  if (mydevError_t status = get_device(device, &dev)) return status;
  Stream* result = nullptr;
  if (mydevError_t status = dev->default_stream(&result)) return status;
  *stream = result->handle();
  return mydevSuccess;
}

mydevError_t mydevStreamCreate(mydevStream_t* stream, int device,
                               int priority) {
  if (mydevError_t status = enter()) return status;
  if (stream == nullptr) {
    return fail(mydevErrorInvalidValue, "mydevStreamCreate: stream is null");
  }
  Device* dev = nullptr;
  if (mydevError_t status = get_device(device, &dev)) return status;
  Stream* result = nullptr;
  if (mydevError_t status =
          Stream::create(dev, priority, /*is_default=*/false, &result)) {
    return status;
  }
  *stream = result->handle();
  return mydevSuccess;
}

mydevError_t mydevStreamDestroy(mydevStream_t handle) {
  if (mydevError_t status = enter()) return status;
  if (handle == nullptr) {
    return fail(mydevErrorInvalidHandle,
                "mydevStreamDestroy: the default stream cannot be destroyed");
  }
  Stream* stream = nullptr;
  if (mydevError_t status = resolve_stream(handle, &stream)) return status;
  if (stream->is_default()) {
    return fail(mydevErrorInvalidHandle,
                "mydevStreamDestroy: the default stream of mydev:%d cannot be "
                "destroyed",
                stream->device()->index());
  }
  stream->destroy();
  return mydevSuccess;
}

mydevError_t mydevStreamGetDevice(mydevStream_t handle, int* device) {
  if (mydevError_t status = enter()) return status;
  if (device == nullptr) {
    return fail(mydevErrorInvalidValue, "mydevStreamGetDevice: device is null");
  }
  Stream* stream = nullptr;
  if (mydevError_t status = resolve_stream(handle, &stream)) return status;
  *device = stream->device()->index();
  return mydevSuccess;
}

mydevError_t mydevStreamGetPriority(mydevStream_t handle, int* priority) {
  if (mydevError_t status = enter()) return status;
  if (priority == nullptr) {
    return fail(mydevErrorInvalidValue,
                "mydevStreamGetPriority: priority is null");
  }
  Stream* stream = nullptr;
  if (mydevError_t status = resolve_stream(handle, &stream)) return status;
  *priority = stream->priority();
  return mydevSuccess;
}

mydevError_t mydevStreamQuery(mydevStream_t handle) {
  if (mydevError_t status = enter()) return status;
  Stream* stream = nullptr;
  if (mydevError_t status = resolve_stream(handle, &stream)) return status;
  if (mydevError_t status = refuse_if_capturing(stream, "mydevStreamQuery")) {
    return status;
  }
  if (mydevError_t status = refuse_if_unsafe("mydevStreamQuery")) {
    return status;
  }
  const uint64_t enqueued = stream->enqueued();
  if (stream->completed() >= enqueued) return mydevSuccess;
  return fail(mydevErrorNotReady,
              "mydevStreamQuery: the stream still has work in flight");
}

mydevError_t mydevSetHostWaitHooks(mydevHostWaitBeginFn_t begin,
                                   mydevHostWaitEndFn_t end) {
  if ((begin == nullptr) != (end == nullptr)) {
    return fail(mydevErrorInvalidValue,
                "mydevSetHostWaitHooks: give both hooks or neither");
  }
  set_host_wait_hooks(begin, end);
  return mydevSuccess;
}

mydevError_t mydevSetFixedKernelTeamQuery(mydevFixedKernelTeamFn_t fixed) {
  set_fixed_kernel_team_query(fixed);
  return mydevSuccess;
}

mydevError_t mydevStreamSynchronize(mydevStream_t handle) {
  if (mydevError_t status = enter()) return status;
  Stream* stream = nullptr;
  if (mydevError_t status = resolve_stream(handle, &stream)) return status;
  if (mydevError_t status =
          refuse_if_capturing(stream, "mydevStreamSynchronize")) {
    return status;
  }
  if (mydevError_t status = refuse_if_unsafe("mydevStreamSynchronize")) {
    return status;
  }
  return synchronize_stream(stream);
}

mydevError_t mydevLaunchKernel(mydevStream_t handle, const char* name,
                               mydevKernelFn_t fn, void* user_data) {
  if (mydevError_t status = enter()) return status;
  const ActivityApiScope activity("mydevLaunchKernel");
  if (fn == nullptr) {
    return fail(mydevErrorInvalidValue,
                "mydevLaunchKernel: kernel '%s' has a null function",
                name != nullptr ? name : "(unnamed)");
  }
  Stream* stream = nullptr;
  if (mydevError_t status = resolve_stream(handle, &stream)) return status;
  if (Capture* capture = stream->capture()) {
    return invalidate(capture, "mydevLaunchKernel",
                      "kernel launched with a function that consumes its "
                      "data (replays need mydevLaunchKernelEx)");
  }
  stream->enqueue(
      Task::kernel(name != nullptr ? name : "(unnamed)", fn, user_data));
  return finish_enqueue(stream);
}

mydevError_t mydevLaunchKernelEx(mydevStream_t handle, const char* name,
                                 mydevKernelFn_t fn, mydevKernelFn_t release,
                                 void* user_data) {
  if (mydevError_t status = enter()) return status;
  const ActivityApiScope activity("mydevLaunchKernelEx");
  if (fn == nullptr || release == nullptr) {
    return fail(mydevErrorInvalidValue,
                "mydevLaunchKernelEx: kernel '%s' has a null %s",
                name != nullptr ? name : "(unnamed)",
                fn == nullptr ? "function" : "release function");
  }
  Stream* stream = nullptr;
  if (mydevError_t status = resolve_stream(handle, &stream)) return status;
  stream->enqueue(Task::kernel(name != nullptr ? name : "(unnamed)", fn,
                               user_data, release));
  return finish_enqueue(stream);
}

}  // extern "C"
