#include "host_view.h"

#include <c10/core/TensorImpl.h>

#include "../runtime/mydev_runtime.h"

namespace mydev {

at::Tensor hostView(const at::Tensor& device_tensor) {
  c10::StorageImpl* device_storage =
      device_tensor.unsafeGetTensorImpl()->unsafe_storage().unsafeGetStorageImpl();
  // A non-owning DataPtr: the device tensor keeps the memory alive.
  c10::Storage host_storage(
      c10::Storage::use_byte_size_t(), device_storage->nbytes(),
      c10::DataPtr(mydevKernelPointer(device_storage->data()), c10::Device(c10::kCPU)),
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
