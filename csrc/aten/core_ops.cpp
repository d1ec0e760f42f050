// The native core of the mydev backend: allocation, views, resizing, storage
// swaps, scalars and fills. Everything else builds on these.
#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "../core/caching_allocator.h"
#include "../core/device.h"
#include "host_view.h"
#include "kernel_launch.h"
#include "scalar_conversion_checks.h"

namespace mydev {
namespace {

constexpr c10::DispatchKeySet kMydevKeys(c10::DispatchKey::PrivateUse1);

c10::Device targetDevice(std::optional<c10::Device> device) {
  if (!device.has_value() || !device->has_index()) {
    return c10::Device(c10::DeviceType::PrivateUse1, currentDevice());
  }
  TORCH_CHECK(device->type() == c10::DeviceType::PrivateUse1, "expected a ",
              kDeviceName, " device, got ", *device);
  checkDeviceIndex(device->index());
  return *device;
}

at::Tensor empty_memory_format(c10::IntArrayRef size,
                               std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout> layout,
                               std::optional<at::Device> device,
                               std::optional<bool> pin_memory,
                               std::optional<at::MemoryFormat> memory_format) {
  TORCH_CHECK(!pin_memory.value_or(false),
              "Only dense CPU tensors can be pinned");
  TORCH_CHECK(layout.value_or(at::kStrided) == at::kStrided, kDeviceName,
              " supports only strided tensors, got layout ", *layout);
  const c10::DeviceGuard guard(targetDevice(device));
  return at::detail::empty_generic(size, &cachingAllocator(), kMydevKeys,
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<at::ScalarType> dtype,
                         std::optional<at::Layout> layout,
                         std::optional<at::Device> device,
                         std::optional<bool> pin_memory) {
  TORCH_CHECK(!pin_memory.value_or(false),
              "Only dense CPU tensors can be pinned");
  TORCH_CHECK(layout.value_or(at::kStrided) == at::kStrided, kDeviceName,
              " supports only strided tensors, got layout ", *layout);
  const c10::DeviceGuard guard(targetDevice(device));
  return at::detail::empty_strided_generic(size, stride, &cachingAllocator(),
                                           kMydevKeys,
                                           c10::dtype_or_default(dtype));
}

// Grows the storage when the new shape needs more bytes; never shrinks it
// (like every ATen backend), so views taken earlier stay valid.
const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<at::MemoryFormat> memory_format) {
  for (const int64_t dim : size) {
    TORCH_CHECK(dim >= 0, "Trying to create tensor with negative dimension ",
                dim, ": ", size);
  }
  c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  if (impl->sizes() != size || memory_format.has_value()) {
    impl->set_sizes_contiguous(size);
    if (memory_format.has_value()) {
      TORCH_CHECK(*memory_format != at::MemoryFormat::Preserve,
                  "Unsupported memory format ", *memory_format);
      impl->empty_tensor_restride(*memory_format);
    }
  }
  if (impl->numel() > 0) {
    const size_t needed = at::detail::computeStorageNbytes(
        impl->sizes(), impl->strides(), self.dtype().itemsize(),
        impl->storage_offset());
    if (needed > impl->unsafe_storage().nbytes()) {
      const c10::DeviceGuard guard(self.device());
      at::native::resize_bytes_nocuda(impl->unsafe_storage(),
                                      static_cast<int64_t>(needed));
    }
  }
  return self;
}

at::Tensor& set_source_storage_offset(at::Tensor& self, c10::Storage source,
                                      int64_t storage_offset,
                                      c10::IntArrayRef size,
                                      c10::IntArrayRef stride) {
  at::native::checkSetStorage(self, std::move(source), storage_offset, size,
                              stride);
  c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  if (stride.data() != nullptr) {
    impl->set_sizes_and_strides(size, stride, storage_offset);
  } else {  // no strides given: contiguous
    impl->set_storage_offset(storage_offset);
    impl->set_sizes_contiguous(size);
  }
  const size_t needed = self.numel() == 0
                            ? 0
                            : at::detail::computeStorageNbytes(
                                  impl->sizes(), impl->strides(),
                                  self.dtype().itemsize(), storage_offset);
  if (needed > self.storage().nbytes()) {
    const c10::DeviceGuard guard(self.device());
    at::native::resize_bytes_nocuda(self.storage(),
                                    static_cast<int64_t>(needed));
  }
  return self;
}

at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source) {
  const int64_t elements =
      static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return set_source_storage_offset(self, std::move(source), 0, {elements},
                                   c10::IntArrayRef());
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  if (self.is_same(source)) {
    return self;
  }
  return set_source_storage_offset(self, source.storage(),
                                   source.storage_offset(), source.sizes(),
                                   source.strides());
}

at::Tensor& set_empty(at::Tensor& self) {
  const c10::DeviceGuard guard(self.device());
  c10::Storage empty_storage(c10::Storage::use_byte_size_t(), 0,
                             &cachingAllocator(), /*resizable=*/true);
  return set_source_storage_offset(self, std::move(empty_storage), 0, {0},
                                   c10::IntArrayRef());
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  TORCH_CHECK(self.numel() > 0, "_local_scalar_dense: the tensor is empty");
  const c10::DeviceGuard guard(self.device());
  at::Tensor host = at::empty({}, self.options().device(c10::kCPU));
  // Synchronous: the value must be on the host when this returns.
  MYDEV_CHECK(mydevMemcpy(host.mutable_data_ptr(), self.const_data_ptr(),
                          self.element_size(), mydevMemcpyDeviceToHost,
                          getCurrentStream().raw()));
  return host.item();
}

at::Tensor& fill_scalar(at::Tensor& self, const at::Scalar& value) {
  // At the call, as cuda's fill_ converts the value, not later on the
  // stream; an empty tensor too, as the CPU's.
  checkFillValueFits(self, value);
  if (self.numel() == 0) {
    return self;
  }
  const c10::DeviceGuard guard(self.device());
  launchKernel("fill_", [view = hostView(self), value] { view.fill_(value); });
  return self;
}

at::Tensor& fill_tensor(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0,
              "fill_ only supports 0-dimension value tensor but got tensor "
              "with ",
              value.dim(), " dimensions.");
  if (value.device().is_cpu()) {
    return fill_scalar(self, value.item());
  }
  TORCH_CHECK(value.device() == self.device(),
              "Expected all tensors to be on the same device, but found at "
              "least two devices, ",
              self.device(), " and ", value.device(), "!");
  if (self.numel() == 0) {
    return self;
  }
  const c10::DeviceGuard guard(self.device());
  // Reads the value on the device, so filling never waits for the host.
  launchKernel("fill_", [view = hostView(self), source = hostView(value)] {
    view.fill_(source);
  });
  return self;
}

at::Tensor& zero_(at::Tensor& self) { return fill_scalar(self, 0); }

bool has_compatible_shallow_copy_type(const at::Tensor& self,
                                      const at::Tensor& from) {
  // `param.data = tensor` between CPU and mydev: both are plain strided
  // TensorImpls, as CPU and CUDA are, so module.to("mydev") can swap data
  // in place.
  auto is_plain = [](const at::Tensor& t) {
    return t.layout() == at::kStrided &&
           (t.device().is_cpu() || t.device().is_privateuseone());
  };
  return is_plain(self) && is_plain(from);
}

void record_stream(at::Tensor& self, c10::Stream stream) {
  cachingAllocator().recordStream(self.storage().data_ptr(), stream);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("as_strided", at::native::as_strided_tensorimpl);
  m.impl("view", at::native::view);
  m.impl("_reshape_alias", at::native::_reshape_alias);
  m.impl("resize_", resize_);
  m.impl("set_.source_Storage", set_source_storage);
  m.impl("set_.source_Storage_storage_offset", set_source_storage_offset);
  m.impl("set_.source_Tensor", set_source_tensor);
  m.impl("set_", set_empty);
  m.impl("_local_scalar_dense", local_scalar_dense);
  m.impl("fill_.Scalar", fill_scalar);
  m.impl("fill_.Tensor", fill_tensor);
  m.impl("zero_", zero_);
  m.impl("_has_compatible_shallow_copy_type", has_compatible_shallow_copy_type);
  m.impl("record_stream", record_stream);
}

}  // namespace mydev
