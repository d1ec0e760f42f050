// Copies and fills: validation against the device memory, the
// pageable/pinned split, and stream ordering. The copy engine reaches device
// memory through its kernel-side addresses (address_space.h).
#include "activity.h"
#include "address_space.h"
#include "capture.h"
#include "device.h"
#include "error.h"
#include "fault_handler.h"
#include "lifecycle.h"
#include "parallel_copy.h"
#include "pointer_attributes.h"
#include "stream.h"

namespace mydev_sim {
namespace {

bool is_device(const PointerInfo& info) {
  return info.type == mydevMemoryTypeDevice;
}

const char* kind_name(mydevMemcpyKind kind) {
  switch (kind) {
    case mydevMemcpyHostToHost: return "HostToHost";
    case mydevMemcpyHostToDevice: return "HostToDevice";
    case mydevMemcpyDeviceToHost: return "DeviceToHost";
    case mydevMemcpyDeviceToDevice: return "DeviceToDevice";
    case mydevMemcpyDefault: return "Default";
  }
  return "invalid";
}

// Device and pinned ranges must stay inside one live allocation; ordinary
// host memory cannot be checked.
mydevError_t check_range(const char* api, const char* role, const void* ptr,
                         size_t count, const PointerInfo& info) {
  if (info.type == mydevMemoryTypeUnregistered) return mydevSuccess;
  if (info.base == nullptr) {
    return fail(mydevErrorInvalidValue,
                "%s: %s %p lies in mydev:%d's memory but not inside a live "
                "allocation (freed?)",
                api, role, ptr, info.device);
  }
  const size_t offset = size_t(static_cast<const char*>(ptr) - info.base);
  if (count > info.size - offset) {
    return fail(mydevErrorInvalidValue,
                "%s: %s range [%p, +%zu bytes) runs past the end of its "
                "allocation [%p, +%zu bytes)",
                api, role, ptr, count, static_cast<void*>(info.base),
                info.size);
  }
  return mydevSuccess;
}

mydevError_t check_kind(const char* api, mydevMemcpyKind kind,
                        const PointerInfo& dst, const PointerInfo& src) {
  if (kind < mydevMemcpyHostToHost || kind > mydevMemcpyDefault) {
    return fail(mydevErrorInvalidValue, "%s: invalid copy kind %d", api,
                int(kind));
  }
  if (kind == mydevMemcpyDefault) return mydevSuccess;
  const bool want_dst_device =
      kind == mydevMemcpyHostToDevice || kind == mydevMemcpyDeviceToDevice;
  const bool want_src_device =
      kind == mydevMemcpyDeviceToHost || kind == mydevMemcpyDeviceToDevice;
  if (is_device(dst) != want_dst_device) {
    return fail(mydevErrorInvalidValue,
                "%s: kind %s, but the destination is %s memory", api,
                kind_name(kind), is_device(dst) ? "device" : "host");
  }
  if (is_device(src) != want_src_device) {
    return fail(mydevErrorInvalidValue,
                "%s: kind %s, but the source is %s memory", api,
                kind_name(kind), is_device(src) ? "device" : "host");
  }
  return mydevSuccess;
}

mydevError_t copy_on_stream(const char* api, void* dst, const void* src,
                            size_t count, mydevMemcpyKind kind,
                            Stream* stream) {
  if (count == 0) return mydevSuccess;
  if (dst == nullptr || src == nullptr) {
    return fail(mydevErrorInvalidValue, "%s: null %s pointer", api,
                dst == nullptr ? "destination" : "source");
  }
  const PointerInfo dst_info = describe_pointer(dst);
  const PointerInfo src_info = describe_pointer(src);
  if (mydevError_t status = check_kind(api, kind, dst_info, src_info)) {
    return status;
  }
  if (mydevError_t status =
          check_range(api, "destination", dst, count, dst_info)) {
    return status;
  }
  if (mydevError_t status = check_range(api, "source", src, count, src_info)) {
    return status;
  }
  const AddressSpace& space = *address_space();
  void* const engine_dst = copy_address(space, dst);
  const void* const engine_src = copy_address(space, src);
  if (dst_info.type == mydevMemoryTypeUnregistered ||
      src_info.type == mydevMemoryTypeUnregistered) {
    // Pageable memory: the caller may reuse its buffer as soon as this
    // returns, so the copy happens now, after the stream's earlier work.
    if (mydevError_t status = refuse_if_capturing(stream, api)) return status;
    if (mydevError_t status = refuse_if_unsafe(api)) return status;
    stream->wait(stream->enqueued(), /*spin=*/true);
    const ActivityHostCopy activity(stream, dst, src, count);
    copy_bytes(engine_dst, engine_src, count);
    report_illegal_access(stream->device(), "memcpy");
  } else {
    stream->enqueue(Task::copy(engine_dst, engine_src, count));
  }
  return finish_enqueue(stream);
}

}  // namespace
}  // namespace mydev_sim

using namespace mydev_sim;

extern "C" {

mydevError_t mydevMemcpyAsync(void* dst, const void* src, size_t count,
                              mydevMemcpyKind kind, mydevStream_t handle) {
  if (mydevError_t status = enter()) return status;
  const ActivityApiScope activity("mydevMemcpyAsync");
  Stream* stream = nullptr;
  if (mydevError_t status = resolve_stream(handle, &stream)) return status;
  return copy_on_stream("mydevMemcpyAsync", dst, src, count, kind, stream);
}

mydevError_t mydevMemcpy(void* dst, const void* src, size_t count,
                         mydevMemcpyKind kind, mydevStream_t handle) {
  if (mydevError_t status = enter()) return status;
  const ActivityApiScope activity("mydevMemcpy");
  Stream* stream = nullptr;
  if (mydevError_t status = resolve_stream(handle, &stream)) return status;
  if (mydevError_t status = refuse_if_capturing(stream, "mydevMemcpy")) {
    return status;
  }
  if (mydevError_t status = refuse_if_unsafe("mydevMemcpy")) return status;
  if (mydevError_t status =
          copy_on_stream("mydevMemcpy", dst, src, count, kind, stream)) {
    return status;
  }
  return synchronize_stream(stream);
}

mydevError_t mydevMemsetAsync(void* dst, int value, size_t count,
                              mydevStream_t handle) {
  if (mydevError_t status = enter()) return status;
  const ActivityApiScope activity("mydevMemsetAsync");
  Stream* stream = nullptr;
  if (mydevError_t status = resolve_stream(handle, &stream)) return status;
  if (count == 0) return mydevSuccess;
  const PointerInfo info = describe_pointer(dst);
  if (!is_device(info)) {
    return fail(mydevErrorInvalidValue,
                "mydevMemsetAsync: %p is not device memory", dst);
  }
  if (mydevError_t status =
          check_range("mydevMemsetAsync", "destination", dst, count, info)) {
    return status;
  }
  stream->enqueue(
      Task::fill(copy_address(*address_space(), dst), value, count));
  return finish_enqueue(stream);
}

}  // extern "C"
