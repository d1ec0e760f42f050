// C++ Meta kernels for lookups that have no at::meta kernel: take (by
// index) and searchsorted / bucketize (by value). torch's Meta kernels for
// them are Python, and the first one a process runs imports sympy. Each lays
// its result out as the CPU kernel does; a call it does not model throws,
// and the device-kernel path then runs the CPU kernel synchronously, which
// raises the CPU's own error at the call.
#include <ATen/native/BucketizationUtils.h>
#include <ATen/ops/empty.h>

#include "meta_layouts.h"
#include "native_meta_table.h"

namespace mydev {
namespace {

using at::Tensor;

// The CPU kernel gathers into a contiguous tensor shaped like the index,
// after checks that need no data (the indices' range is checked on the
// data, by the kernel).
Tensor takeMeta(const Tensor& self, const Tensor& index) {
  TORCH_CHECK(index.scalar_type() == at::kLong &&
                  !(self.numel() == 0 && index.numel() != 0),
              "take: left to the CPU kernel");
  return at::empty(index.sizes(), self.options());
}

// searchsorted's CPU kernel resizes an int64 (int32 on request) result to
// the values' shape, after searchsorted_pre_check; a sorter's range check
// reads it, so calls with a sorter are left to the CPU kernel.
Tensor searchsortedMeta(const Tensor& sorted_sequence, const Tensor& self,
                        bool out_int32, bool right,
                        std::optional<std::string_view> side,
                        const OptionalTensor& sorter) {
  TORCH_CHECK(!sorter.has_value() || !sorter->defined(),
              "searchsorted: a sorter is checked on its data");
  Tensor result = at::empty(
      self.sizes(), self.options().dtype(out_int32 ? at::kInt : at::kLong));
  at::native::searchsorted_pre_check(sorted_sequence, self, result, out_int32,
                                     right, side, Tensor());
  return result;
}

Tensor searchsortedScalarMeta(const Tensor& sorted_sequence,
                              const at::Scalar& self, bool out_int32,
                              bool right, std::optional<std::string_view> side,
                              const OptionalTensor& sorter) {
  return searchsortedMeta(
      sorted_sequence,
      at::empty({}, sorted_sequence.options().dtype(self.type())), out_int32,
      right, side, sorter);
}

// bucketize is searchsorted over one-dimensional boundaries.
Tensor bucketizeMeta(const Tensor& self, const Tensor& boundaries,
                     bool out_int32, bool right) {
  TORCH_CHECK(boundaries.dim() == 1, "bucketize: left to the CPU kernel");
  return searchsortedMeta(boundaries, self, out_int32, right, std::nullopt,
                          std::nullopt);
}

}  // namespace

void addLookupMetaKernels(NativeMetaTable& table) {
  using SearchSorted =
      Tensor(const Tensor&, const Tensor&, bool, bool,
             std::optional<std::string_view>, const OptionalTensor&);
  using SearchSortedScalar =
      Tensor(const Tensor&, const at::Scalar&, bool, bool,
             std::optional<std::string_view>, const OptionalTensor&);
  table.add<Tensor(const Tensor&, const Tensor&)>("aten::take", "", &takeMeta);
  table.add<SearchSorted>("aten::searchsorted", "Tensor", &searchsortedMeta);
  table.add<SearchSortedScalar>("aten::searchsorted", "Scalar",
                                &searchsortedScalarMeta);
  table.add<Tensor(const Tensor&, const Tensor&, bool, bool)>(
      "aten::bucketize", "Tensor", &bucketizeMeta);
}

}  // namespace mydev
