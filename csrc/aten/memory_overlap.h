// Whether an output may share bytes with an input. The device's own
// kernels (matrix_vector_product, index_rows) take only calls where
// it cannot; any other call goes to ATen's kernel, which checks overlaps
// and raises as the CPU does.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace mydev {

// True when the address ranges the two tensors' elements span intersect.
// Conservative: two interleaved views of one storage (its even and its odd
// elements) count as overlapping. Not ATen's get_overlap_status: that
// answers "too hard" for any tensor that is not dense, which would refuse a
// sliced weight matrix that this test lets through.
inline bool elementSpansOverlap(const at::Tensor& a, const at::Tensor& b) {
  if (a.numel() == 0 || b.numel() == 0) {
    return false;
  }
  struct Span {
    uintptr_t begin, end;
  };
  const auto span = [](const at::Tensor& t) {
    int64_t last = 0;
    for (int64_t d = 0; d < t.dim(); ++d) {
      last += (t.size(d) - 1) * t.stride(d);
    }
    const auto begin = reinterpret_cast<uintptr_t>(t.const_data_ptr());
    return Span{begin,
                begin + static_cast<uintptr_t>((last + 1) * t.element_size())};
  };
  const Span sa = span(a), sb = span(b);
  return sa.begin < sb.end && sb.begin < sa.end;
}

}  // namespace mydev
