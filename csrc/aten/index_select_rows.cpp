#include "index_select_rows.h"

#include <c10/util/Exception.h>

#include <cstdint>
#include <cstring>

#include "../runtime/mydev_runtime.h"
#include "kernel_launch.h"
#include "memory_overlap.h"

namespace mydev {
namespace {

// Bytes copied at most. ATen's kernel copies rows with a thread team past
// its grain size, which a lookup of a decode step (one row of a few KiB)
// or a small batch never reaches; a large gather keeps ATen's kernel.
constexpr int64_t kMaxRowGatherBytes = int64_t{1} << 20;

// What the kernel holds: no tensors, no stack.
struct RowGatherCall {
  const void* source;  // `rows` rows of `row_bytes` bytes
  const void* index;   // `count` indices, int64 or int32
  void* result;        // `count` rows
  int64_t rows, count, row_bytes;
  bool int64_index;
};

template <typename Index>
void copyRows(const RowGatherCall& call) {
  const auto* source =
      static_cast<const char*>(mydevKernelPointer(call.source));
  const auto* index = static_cast<const Index*>(mydevKernelPointer(call.index));
  auto* result = static_cast<char*>(mydevKernelPointer(call.result));
  for (int64_t i = 0; i < call.count; ++i) {
    const int64_t row = static_cast<int64_t>(index[i]);
    // ATen's CPU kernel's check and message, row by row as it copies.
    TORCH_CHECK_INDEX(row >= 0 && row < call.rows,
                      "index out of range in self");
    std::memcpy(result + i * call.row_bytes, source + row * call.row_bytes,
                static_cast<size_t>(call.row_bytes));
  }
}

}  // namespace

bool launchIndexSelectRows(const c10::OperatorHandle& op,
                           c10::ArrayRef<c10::IValue> device_args,
                           const at::Tensor& result) {
  // index_select(self, dim, index) and its out= form; not the Dimname ones.
  const c10::OperatorName& name = op.operator_name();
  if (name.name != "aten::index_select" ||
      (!name.overload_name.empty() && name.overload_name != "out") ||
      device_args.size() < 3 || !device_args[0].isTensor() ||
      !device_args[1].isInt() || !device_args[2].isTensor()) {
    return false;
  }
  const at::Tensor& self = device_args[0].toTensor();
  const at::Tensor& index = device_args[2].toTensor();
  const c10::Device device = result.device();
  if (!device.is_privateuseone() || self.device() != device ||
      index.device() != device || self.dim() == 0 ||
      (device_args[1].toInt() != 0 && device_args[1].toInt() != -self.dim()) ||
      !self.is_contiguous() || self.is_neg() || self.is_conj() ||
      (index.scalar_type() != at::kLong && index.scalar_type() != at::kInt) ||
      index.dim() > 1 || !index.is_contiguous() ||
      result.scalar_type() != self.scalar_type() || !result.is_contiguous() ||
      result.is_neg() || result.is_conj() || result.numel() == 0 ||
      result.nbytes() > static_cast<size_t>(kMaxRowGatherBytes) ||
      elementSpansOverlap(result, self) || elementSpansOverlap(result, index)) {
    return false;
  }
  const int64_t row_elements =
      self.size(0) == 0 ? 0 : self.numel() / self.size(0);
  if (result.numel() != index.numel() * row_elements) {
    return false;
  }
  const RowGatherCall call{
      self.const_data_ptr(),
      index.const_data_ptr(),
      result.data_ptr(),
      self.size(0),
      index.numel(),
      row_elements * static_cast<int64_t>(self.element_size()),
      index.scalar_type() == at::kLong};
  launchKernel("index_select_rows", [call] {
    if (call.int64_index) {
      copyRows<int64_t>(call);
    } else {
      copyRows<int32_t>(call);
    }
  });
  return true;
}

}  // namespace mydev
