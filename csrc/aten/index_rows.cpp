#include "index_rows.h"

#include <c10/core/Scalar.h>
#include <c10/core/WrapDimMinimal.h>
#include <c10/util/Exception.h>
#include <c10/util/accumulate.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <optional>

#include "../runtime/mydev_runtime.h"
#include "kernel_launch.h"
#include "memory_overlap.h"

namespace mydev {
namespace {

// Bytes written at most. ATen's kernels copy rows with a thread team past
// their grain size, which a lookup of a decode step (one row of a few KiB)
// or a small batch never reaches; a large call keeps ATen's kernel.
constexpr int64_t kMaxRowBytes = int64_t{1} << 20;

// What the gathers say of an index out of range: index_select refuses
// negative indices, x[index] counts them from the end (as on the CPU).
enum class NegativeIndex { Refused, FromTheEnd };

// An index out of range with the CPU kernel's message; else the index of
// the row it picks in a dimension of `size`.
int64_t checkedRow(int64_t index, int64_t size, int64_t dim,
                   NegativeIndex negative) {
  if (negative == NegativeIndex::Refused) {
    TORCH_CHECK_INDEX(index >= 0 && index < size, "index out of range in self");
    return index;
  }
  TORCH_CHECK_INDEX(index >= -size && index < size, "index ", index,
                    " is out of bounds for dimension ", dim, " with size ",
                    size);
  return index < 0 ? index + size : index;
}

// What a gather's kernel holds: no tensors, no stack.
struct RowGatherCall {
  const void* source;  // `rows` rows of `row_bytes` bytes
  const void* index;   // `count` indices, int64 or int32
  void* result;        // `count` rows
  int64_t rows, count, row_bytes;
  bool int64_index;
  NegativeIndex negative;
};

template <typename Index>
void copyRows(const RowGatherCall& call) {
  const auto* source =
      static_cast<const char*>(mydevKernelPointer(call.source));
  const auto* index = static_cast<const Index*>(mydevKernelPointer(call.index));
  auto* result = static_cast<char*>(mydevKernelPointer(call.result));
  for (int64_t i = 0; i < call.count; ++i) {
    // Row by row as it copies, as ATen's CPU kernel checks.
    const int64_t row = checkedRow(static_cast<int64_t>(index[i]), call.rows,
                                   /*dim=*/0, call.negative);
    std::memcpy(result + i * call.row_bytes, source + row * call.row_bytes,
                static_cast<size_t>(call.row_bytes));
  }
}

bool isDeviceIndex(const at::Tensor& index, c10::Device device) {
  return index.device() == device && index.is_contiguous() &&
         (index.scalar_type() == at::kLong || index.scalar_type() == at::kInt);
}

// Whether `result` is what the device's kernels write: a contiguous tensor
// of `self`'s dtype on `self`'s device, of at most kMaxRowBytes, that does
// not overlap `index`.
bool isDeviceResult(const at::Tensor& result, const at::Tensor& self,
                    const at::Tensor& index) {
  const c10::Device device = result.device();
  return device.is_privateuseone() && self.device() == device &&
         self.dim() > 0 && self.is_contiguous() && !self.is_neg() &&
         !self.is_conj() && result.scalar_type() == self.scalar_type() &&
         result.is_contiguous() && !result.is_neg() && !result.is_conj() &&
         result.numel() > 0 &&
         result.nbytes() <= static_cast<size_t>(kMaxRowBytes) &&
         !elementSpansOverlap(result, index);
}

// Rows of dimension 0 of `self` picked by `index`, into `result` (which
// holds index.numel() of them), if the call is one the kernel takes.
bool launchRowGather(const char* kernel, const at::Tensor& self,
                     const at::Tensor& index, const at::Tensor& result,
                     NegativeIndex negative) {
  if (!isDeviceResult(result, self, index) ||
      !isDeviceIndex(index, result.device()) ||
      elementSpansOverlap(result, self)) {
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
      index.scalar_type() == at::kLong,
      negative};
  launchKernel(kernel, [call] {
    if (call.int64_index) {
      copyRows<int64_t>(call);
    } else {
      copyRows<int32_t>(call);
    }
  });
  return true;
}

// One element of any dtype index_fill's CPU kernel fills, as bytes.
using ElementBytes = std::array<char, 16>;

template <typename T>
ElementBytes bytesOf(const T& value) {
  static_assert(sizeof(T) <= sizeof(ElementBytes));
  ElementBytes bytes{};
  std::memcpy(bytes.data(), &value, sizeof(T));
  return bytes;
}

// `value` as an element of `dtype`, converted as the CPU kernel converts it
// (an overflow raises its error); none for a dtype the CPU kernel lacks.
std::optional<ElementBytes> elementOf(const c10::Scalar& value,
                                      at::ScalarType dtype) {
  switch (dtype) {
#define MYDEV_ELEMENT_OF(type, name) \
  case at::ScalarType::name: return bytesOf(value.to<type>());
    AT_FORALL_SCALAR_TYPES_AND3(Bool, Half, BFloat16, MYDEV_ELEMENT_OF)
    AT_FORALL_COMPLEX_TYPES(MYDEV_ELEMENT_OF)
    MYDEV_ELEMENT_OF(c10::complex<c10::Half>, ComplexHalf)
#undef MYDEV_ELEMENT_OF
    default: return std::nullopt;
  }
}

// What a fill's kernel holds. `self` is viewed as [outer, size, inner]
// elements around the filled dimension.
struct RowFillCall {
  const void* source;  // self, copied into result first unless the same
  const void* index;   // `count` int64 indices
  void* result;
  int64_t outer, size, inner, count, dim;
  int64_t element_bytes;
  ElementBytes value;
};

// `count` copies of `value`, an element of `element_bytes` bytes, from
// `destination`: typed stores the compiler vectorizes, where a memcpy per
// element of a size known only at run time took 8x the CPU's time to fill
// 2 slices of 64K float32 elements.
void fillElements(char* destination, int64_t count, const ElementBytes& value,
                  int64_t element_bytes) {
  const auto fill = [&](auto element) {
    std::memcpy(&element, value.data(), sizeof element);
    std::fill_n(reinterpret_cast<decltype(element)*>(destination), count,
                element);
  };
  switch (element_bytes) {
    case 1: fill(uint8_t{}); break;
    case 2: fill(uint16_t{}); break;
    case 4: fill(uint32_t{}); break;
    case 8: fill(uint64_t{}); break;
    default: fill(value); break;
  }
}

void fillRows(const RowFillCall& call) {
  const auto* source =
      static_cast<const char*>(mydevKernelPointer(call.source));
  const auto* index =
      static_cast<const int64_t*>(mydevKernelPointer(call.index));
  auto* result = static_cast<char*>(mydevKernelPointer(call.result));
  const int64_t slice_bytes = call.inner * call.element_bytes;
  if (source != result) {
    std::memcpy(result, source,
                static_cast<size_t>(call.outer * call.size * slice_bytes));
  }
  for (int64_t i = 0; i < call.count; ++i) {
    const int64_t row =
        checkedRow(index[i], call.size, call.dim, NegativeIndex::FromTheEnd);
    for (int64_t o = 0; o < call.outer; ++o) {
      fillElements(result + (o * call.size + row) * slice_bytes, call.inner,
                   call.value, call.element_bytes);
    }
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
  const int64_t dim = device_args[1].toInt();
  if (self.dim() == 0 || (dim != 0 && dim != -self.dim()) || index.dim() > 1) {
    return false;
  }
  return launchRowGather("index_select_rows", self, index, result,
                         NegativeIndex::Refused);
}

bool launchIndexRows(const c10::OperatorHandle& op,
                     c10::ArrayRef<c10::IValue> device_args,
                     const at::Tensor& result) {
  // index(self, indices) with one index tensor: x[index]. Boolean masks have
  // shapes that depend on the data and never reach a device kernel.
  const c10::OperatorName& name = op.operator_name();
  if (name.name != "aten::index" || name.overload_name != "Tensor" ||
      device_args.size() != 2 || !device_args[0].isTensor() ||
      !device_args[1].isList()) {
    return false;
  }
  const c10::ArrayRef<c10::IValue> indices = device_args[1].toListRef();
  if (indices.size() != 1 || !indices[0].isTensor()) {
    return false;
  }
  return launchRowGather("index_rows", device_args[0].toTensor(),
                         indices[0].toTensor(), result,
                         NegativeIndex::FromTheEnd);
}

bool launchIndexFillRows(const c10::OperatorHandle& op,
                         c10::ArrayRef<c10::IValue> device_args,
                         const at::Tensor& result) {
  // index_fill(self, dim, index, value) and index_fill_, with a Scalar value.
  const c10::OperatorName& name = op.operator_name();
  const bool in_place = name.name == "aten::index_fill_";
  if ((!in_place && name.name != "aten::index_fill") ||
      name.overload_name != "int_Scalar" || device_args.size() != 4 ||
      !device_args[0].isTensor() || !device_args[1].isInt() ||
      !device_args[2].isTensor() || !device_args[3].isScalar()) {
    return false;
  }
  const at::Tensor& self = device_args[0].toTensor();
  const at::Tensor& index = device_args[2].toTensor();
  if (!isDeviceResult(result, self, index) ||
      !isDeviceIndex(index, result.device()) ||
      index.scalar_type() != at::kLong || index.dim() > 1 ||
      result.sizes() != self.sizes() ||
      (in_place ? !result.is_same(self) : elementSpansOverlap(result, self))) {
    return false;
  }
  const int64_t dim = c10::maybe_wrap_dim(device_args[1].toInt(), self.dim());
  const std::optional<ElementBytes> value =
      elementOf(device_args[3].toScalar(), self.scalar_type());
  if (!value.has_value()) {
    return false;
  }
  const RowFillCall call{self.const_data_ptr(),
                         index.const_data_ptr(),
                         result.data_ptr(),
                         c10::multiply_integers(self.sizes().slice(0, dim)),
                         self.size(dim),
                         c10::multiply_integers(self.sizes().slice(dim + 1)),
                         index.numel(),
                         dim,
                         static_cast<int64_t>(self.element_size()),
                         *value};
  launchKernel("index_fill_rows", [call] { fillRows(call); });
  return true;
}

}  // namespace mydev
