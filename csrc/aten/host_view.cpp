#include "host_view.h"

#include <c10/core/TensorImpl.h>

#include "../runtime/mydev_runtime.h"

namespace mydev {
namespace {

// A host view's storage keeps the device address of the memory as its
// DataPtr context; the view owns nothing, so there is nothing to delete.
void keepDeviceAddress(void* /*device_address*/) {}

}  // namespace

at::Tensor hostView(const at::Tensor& device_tensor) {
  c10::StorageImpl* device_storage = device_tensor.unsafeGetTensorImpl()
                                         ->unsafe_storage()
                                         .unsafeGetStorageImpl();
  // A non-owning DataPtr: the device tensor keeps the memory alive.
  c10::Storage host_storage(
      c10::Storage::use_byte_size_t(), device_storage->nbytes(),
      c10::DataPtr(mydevKernelPointer(device_storage->data()),
                   const_cast<void*>(device_storage->data()),
                   &keepDeviceAddress, c10::Device(c10::kCPU)),
      /*allocator=*/nullptr, /*resizable=*/false);
  auto view = at::detail::make_tensor<c10::TensorImpl>(
      std::move(host_storage), c10::DispatchKeySet(c10::DispatchKey::CPU),
      device_tensor.dtype());
  c10::TensorImpl* impl = view.unsafeGetTensorImpl();
  impl->set_sizes_and_strides(device_tensor.sizes(), device_tensor.strides(),
                              device_tensor.storage_offset());
  // Lazy conjugate/negative views stay lazy: the CPU kernel honours the bits.
  impl->_set_conj(device_tensor.is_conj());
  impl->_set_neg(device_tensor.is_neg());
  return view;
}

}  // namespace mydev

namespace mydev {

void* deviceAddressOf(const at::Tensor& host_view) {
  const c10::DataPtr& storage = host_view.storage().data_ptr();
  TORCH_CHECK(storage.get_deleter() == &keepDeviceAddress,
              "deviceAddressOf: not a host view of device memory");
  const ptrdiff_t offset =
      static_cast<const char*>(host_view.const_data_ptr()) -
      static_cast<const char*>(storage.get());
  return static_cast<char*>(storage.get_context()) + offset;
}

}  // namespace mydev
