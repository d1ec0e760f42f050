// Copies that involve mydev: host->device, device->host, within a device and
// between devices; any layout, any dtype conversion, stream-ordered, with
// non_blocking honoured for pinned host memory.
#include <ATen/MemoryOverlap.h>
#include <ATen/core/CachingHostAllocator.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "../core/host_allocator.h"
#include "../core/mydev_event.h"
#include "host_view.h"
#include "kernel_launch.h"

namespace mydev {
namespace {

// Dense tensors with equal sizes, strides and conjugate/negative bits occupy
// one byte span laid out identically, so a plain memcpy of that span is the
// whole copy.
bool sameDenseLayout(const at::Tensor& a, const at::Tensor& b) {
  return a.dtype() == b.dtype() && a.sizes() == b.sizes() &&
         a.strides() == b.strides() && a.is_conj() == b.is_conj() &&
         a.is_neg() == b.is_neg() && a.is_non_overlapping_and_dense() &&
         b.is_non_overlapping_and_dense();
}

size_t denseBytes(const at::Tensor& t) {
  return static_cast<size_t>(t.numel()) * t.element_size();
}

// A tensor on `device` shaped like `like` (its strides if it is dense,
// contiguous otherwise) with `dtype` and like's conjugate/negative bits, so
// that its raw bytes are what `like`'s raw bytes must become.
at::Tensor denseLike(const at::Tensor& like, at::ScalarType dtype,
                     c10::Device device) {
  const auto options = like.options().dtype(dtype).device(device);
  at::Tensor result =
      like.is_non_overlapping_and_dense()
          ? at::empty_strided(like.sizes(), like.strides(), options)
          : at::empty(like.sizes(), options);
  result.unsafeGetTensorImpl()->_set_conj(like.is_conj());
  result.unsafeGetTensorImpl()->_set_neg(like.is_neg());
  return result;
}

void memcpyOnStream(void* dst, const void* src, size_t bytes,
                    mydevMemcpyKind kind, const MydevStream& stream,
                    bool non_blocking) {
  if (non_blocking) {
    MYDEV_CHECK(mydevMemcpyAsync(dst, src, bytes, kind, stream.raw()));
  } else {
    MYDEV_CHECK(mydevMemcpy(dst, src, bytes, kind, stream.raw()));
  }
}

// Tells the pinned allocator a copy on `stream` still uses `host`'s block.
void notePinnedUse(const at::Tensor& host, const MydevStream& stream) {
  const c10::DataPtr& data = host.storage().data_ptr();
  hostAllocator().record_event(const_cast<void*>(data.get()),
                               data.get_context(), stream.unwrap());
}

void deviceToDevice(const at::Tensor& src, const at::Tensor& dst,
                    const MydevStream& stream) {
  if (sameDenseLayout(src, dst)) {
    MYDEV_CHECK(mydevMemcpyAsync(dst.data_ptr(), src.const_data_ptr(),
                                 denseBytes(src), mydevMemcpyDeviceToDevice,
                                 stream.raw()));
    return;
  }
  launchKernel("copy_", stream,
               [out = hostView(dst), in = hostView(src)] { out.copy_(in); });
}

void hostToDevice(const at::Tensor& src, const at::Tensor& dst,
                  bool non_blocking) {
  const c10::DeviceGuard guard(dst.device());
  const MydevStream stream = getCurrentStream();
  if (!sameDenseLayout(src, dst)) {
    // Convert and lay out on the host (ATen's CPU copy), then one memcpy;
    // the staging buffer is pageable, so that memcpy completes at once.
    at::Tensor staging = denseLike(dst, dst.scalar_type(), c10::kCPU);
    staging.copy_(src);
    if (dst.is_non_overlapping_and_dense()) {
      memcpyOnStream(dst.data_ptr(), staging.const_data_ptr(),
                     denseBytes(staging), mydevMemcpyHostToDevice, stream,
                     /*non_blocking=*/false);
      return;
    }
    at::Tensor dense = at::empty(dst.sizes(), dst.options());
    memcpyOnStream(dense.data_ptr(), staging.const_data_ptr(),
                   denseBytes(staging), mydevMemcpyHostToDevice, stream,
                   /*non_blocking=*/false);
    deviceToDevice(dense, dst, stream);
    return;
  }
  const bool async = non_blocking && isPinnedPointer(src.const_data_ptr());
  memcpyOnStream(dst.data_ptr(), src.const_data_ptr(), denseBytes(src),
                 mydevMemcpyHostToDevice, stream, async);
  if (async) {
    notePinnedUse(src, stream);
  }
}

void deviceToHost(const at::Tensor& src, const at::Tensor& dst,
                  bool non_blocking) {
  const c10::DeviceGuard guard(src.device());
  const MydevStream stream = getCurrentStream();
  // Convert and lay out on the device first, so the bus carries dst's bytes.
  at::Tensor device_side = src;
  if (src.scalar_type() != dst.scalar_type() ||
      !src.is_non_overlapping_and_dense() ||
      (dst.is_non_overlapping_and_dense() && src.strides() != dst.strides())) {
    device_side = denseLike(dst, dst.scalar_type(), src.device());
    deviceToDevice(src, device_side, stream);
  }
  if (sameDenseLayout(device_side, dst)) {
    const bool async = non_blocking && isPinnedPointer(dst.const_data_ptr());
    memcpyOnStream(dst.data_ptr(), device_side.const_data_ptr(),
                   denseBytes(dst), mydevMemcpyDeviceToHost, stream, async);
    if (async) {
      notePinnedUse(dst, stream);
    }
    return;
  }
  at::Tensor staging = denseLike(device_side, dst.scalar_type(), c10::kCPU);
  memcpyOnStream(staging.data_ptr(), device_side.const_data_ptr(),
                 denseBytes(staging), mydevMemcpyDeviceToHost, stream,
                 /*non_blocking=*/false);
  dst.copy_(staging);
}

// Between two devices: the copy runs on the destination's current stream,
// after the source's queued work, and the source's stream waits for the copy
// before it may reuse the source memory.
void betweenDevices(const at::Tensor& src, const at::Tensor& dst) {
  const MydevStream src_stream = getCurrentStream(src.device().index());
  const MydevStream dst_stream = getCurrentStream(dst.device().index());
  MydevEvent src_ready;
  src_ready.record(src_stream);
  src_ready.block(dst_stream);
  {
    const c10::DeviceGuard guard(dst.device());
    deviceToDevice(src, dst, dst_stream);
  }
  MydevEvent copied;
  copied.record(dst_stream);
  copied.block(src_stream);
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst,
                     bool non_blocking) {
  TORCH_CHECK(self.defined() && dst.defined(),
              "copy_: both tensors must be defined");
  // Broadcasting is copy_'s contract; expand() also rejects bad shapes with
  // ATen's usual message (before the empty case, as on CPU).
  at::Tensor src = self.expand_as(dst);
  if (dst.numel() == 0) {
    return dst;
  }
  // The checks CPU and CUDA make, here on the host where they are cheap.
  at::assert_no_internal_overlap(dst);
  at::assert_no_partial_overlap(dst, src);
  const bool src_on_device = src.device().is_privateuseone();
  const bool dst_on_device = dst.device().is_privateuseone();
  if (src_on_device && dst_on_device) {
    if (src.device() == dst.device()) {
      const c10::DeviceGuard guard(dst.device());
      deviceToDevice(src, dst, getCurrentStream());
    } else {
      betweenDevices(src, dst);
    }
  } else if (dst_on_device) {
    TORCH_CHECK(src.device().is_cpu(), "copy_ from ", src.device(), " to ",
                dst.device(), " is not supported");
    hostToDevice(src, dst, non_blocking);
  } else {
    TORCH_CHECK(dst.device().is_cpu(), "copy_ from ", src.device(), " to ",
                dst.device(), " is not supported");
    deviceToHost(src, dst, non_blocking);
  }
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  dst.resize_(self.sizes());
  return copy_from(self, dst, /*non_blocking=*/false);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
}

// Copies handle lazy conjugate/negative views themselves (memcpy when the
// bits agree, the CPU kernel over bit-carrying host views otherwise). The
// generic conj/neg fallbacks would materialise with clone(), which copies,
// which lands here again: without these fallthroughs that recursion never
// ends.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

}  // namespace mydev
