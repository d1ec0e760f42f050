#include "host_view.h"

#include <c10/core/TensorImpl.h>

#include "../runtime/mydev_runtime.h"

namespace mydev {
namespace {

// A host view's storage keeps the device address of the memory as its
// DataPtr context; the view owns nothing, so there is nothing to delete.
void keepDeviceAddress(void* /*device_address*/) {}

// A non-owning DataPtr: the device tensor keeps the memory alive.
c10::Storage makeHostStorage(const void* address, size_t nbytes) {
  return c10::Storage(
      c10::Storage::use_byte_size_t(), nbytes,
      c10::DataPtr(mydevKernelPointer(address), const_cast<void*>(address),
                   &keepDeviceAddress, c10::Device(c10::kCPU)),
      /*allocator=*/nullptr, /*resizable=*/false);
}

// The host storage over a device storage's bytes. Host storages own
// nothing and are never resized, so one serves every view of the same bytes
// (same device address and size), whichever device storage they came from;
// each thread keeps the recent ones, which spares a model's ops an
// allocation and a free per tensor (a third of a host view's cost).
c10::Storage hostStorageOver(const c10::StorageImpl& device_storage) {
  struct Entry {
    const void* device_address = nullptr;
    size_t nbytes = 0;
    c10::Storage storage;
  };
  constexpr size_t kEntries = 64;  // a power of two
  thread_local Entry recent[kEntries];
  const void* address = device_storage.data();
  const size_t nbytes = device_storage.nbytes();
  if (nbytes == 0) {
    // Empty storages share an address without sharing memory.
    return makeHostStorage(address, 0);
  }
  Entry& entry =
      recent[(reinterpret_cast<uintptr_t>(address) >> 6) & (kEntries - 1)];
  if (!entry.storage || entry.device_address != address ||
      entry.nbytes != nbytes) {
    entry = {address, nbytes, makeHostStorage(address, nbytes)};
  }
  return entry.storage;
}

}  // namespace

at::Tensor hostView(const at::Tensor& device_tensor) {
  c10::Storage host_storage =
      hostStorageOver(*device_tensor.unsafeGetTensorImpl()
                           ->unsafe_storage()
                           .unsafeGetStorageImpl());
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

namespace {

// The shared view matches the device tensor: same bytes, dtype and layout.
// Comparing with the view's own metadata also notices a view that a kernel
// restrided after all: it is replaced.
bool sameView(const at::Tensor& view, const at::Tensor& device_tensor,
              const c10::StorageImpl& device_storage) {
  const c10::StorageImpl& host_storage =
      *view.unsafeGetTensorImpl()->unsafe_storage().unsafeGetStorageImpl();
  return host_storage.data_ptr().get_context() == device_storage.data() &&
         host_storage.nbytes() == device_storage.nbytes() &&
         view.dtype() == device_tensor.dtype() &&
         view.storage_offset() == device_tensor.storage_offset() &&
         view.sizes() == device_tensor.sizes() &&
         view.strides() == device_tensor.strides() &&
         view.is_conj() == device_tensor.is_conj() &&
         view.is_neg() == device_tensor.is_neg();
}

size_t layoutHash(const at::Tensor& t, const void* address) {
  size_t hash = reinterpret_cast<uintptr_t>(address) >> 4;
  hash = hash * 31 + static_cast<size_t>(t.storage_offset());
  for (const int64_t size : t.sizes()) hash = hash * 31 + size;
  for (const int64_t stride : t.strides()) hash = hash * 31 + stride;
  return hash ^ (hash >> 17);
}

}  // namespace

at::Tensor sharedHostView(const at::Tensor& device_tensor) {
  constexpr size_t kEntries = 128;  // a power of two
  thread_local at::Tensor recent[kEntries];
  const c10::StorageImpl& device_storage = *device_tensor.unsafeGetTensorImpl()
                                                ->unsafe_storage()
                                                .unsafeGetStorageImpl();
  // Empty tensors share an address (and may share a layout) without being
  // one tensor, and one view object would be one tensor to ATen: its
  // overlap checks refuse `stack` of two empty tensors, and `linalg_qr`
  // resizing its empty Q would resize its empty input.
  if (device_tensor.numel() == 0) {
    return hostView(device_tensor);
  }
  at::Tensor& entry =
      recent[layoutHash(device_tensor, device_storage.data()) & (kEntries - 1)];
  if (!entry.defined() || !sameView(entry, device_tensor, device_storage)) {
    entry = hostView(device_tensor);
  }
  return entry;
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
