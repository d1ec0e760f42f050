#include "reduction.h"

#include <ATen/Dispatch.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <type_traits>

namespace mydev::distributed {

namespace {

// Elements per chunk: the accumulator (at most 8 bytes each) and one chunk
// of each part stay in L1/L2 while the chunk is reduced.
constexpr int64_t kChunk = 2048;

template <typename Acc>
Acc minimumOf(Acc a, Acc b) {
  if constexpr (std::is_floating_point_v<Acc>) {
    if (a != a || b != b) return a + b;  // NaN wins, as in at::minimum
  }
  return b < a ? b : a;
}

template <typename Acc>
Acc maximumOf(Acc a, Acc b) {
  if constexpr (std::is_floating_point_v<Acc>) {
    if (a != a || b != b) return a + b;
  }
  return a < b ? b : a;
}

template <typename T, typename Acc, typename Combine>
void combine(Acc* acc, const T* part, int64_t len, Combine fn) {
  for (int64_t i = 0; i < len; ++i) {
    acc[i] = static_cast<Acc>(fn(acc[i], static_cast<Acc>(part[i])));
  }
}

template <typename T, typename Acc>
void reduceTyped(T* out, const std::vector<const void*>& parts, int64_t numel,
                 c10d::ReduceOp::RedOpType op) {
  Acc acc[kChunk];
  const auto n = static_cast<int64_t>(parts.size());
  for (int64_t start = 0; start < numel; start += kChunk) {
    const int64_t len = std::min(kChunk, numel - start);
    const T* first = static_cast<const T*>(parts[0]) + start;
    for (int64_t i = 0; i < len; ++i) {
      acc[i] = static_cast<Acc>(first[i]);
    }
    for (int64_t r = 1; r < n; ++r) {
      const T* part = static_cast<const T*>(parts[r]) + start;
      switch (op) {
        case c10d::ReduceOp::SUM:
        case c10d::ReduceOp::AVG:
          combine(acc, part, len, [](Acc a, Acc b) { return a + b; });
          break;
        case c10d::ReduceOp::PRODUCT:
          combine(acc, part, len, [](Acc a, Acc b) { return a * b; });
          break;
        case c10d::ReduceOp::MIN:
          combine(acc, part, len, minimumOf<Acc>);
          break;
        case c10d::ReduceOp::MAX:
          combine(acc, part, len, maximumOf<Acc>);
          break;
        default: TORCH_INTERNAL_ASSERT(false, "unchecked reduce op");
      }
    }
    if (op == c10d::ReduceOp::AVG) {
      const Acc count = static_cast<Acc>(n);
      for (int64_t i = 0; i < len; ++i) {
        acc[i] = static_cast<Acc>(acc[i] / count);  // integers truncate
      }
    }
    T* dst = out + start;
    for (int64_t i = 0; i < len; ++i) {
      dst[i] = static_cast<T>(acc[i]);
    }
  }
}

}  // namespace

void reduceBuffers(void* out, const std::vector<const void*>& parts,
                   int64_t numel, at::ScalarType dtype,
                   c10d::ReduceOp::RedOpType op) {
  TORCH_INTERNAL_ASSERT(!parts.empty());
  AT_DISPATCH_ALL_TYPES_AND2(
      at::kHalf, at::kBFloat16, dtype, "myccl_reduce", [&] {
        using Acc =
            std::conditional_t<std::is_same_v<scalar_t, at::Half> ||
                                   std::is_same_v<scalar_t, at::BFloat16>,
                               float, scalar_t>;
        reduceTyped<scalar_t, Acc>(static_cast<scalar_t*>(out), parts, numel,
                                   op);
      });
}

void reduceInto(const at::Tensor& out, const std::vector<at::Tensor>& parts,
                c10d::ReduceOp::RedOpType op) {
  std::vector<const void*> pointers;
  pointers.reserve(parts.size());
  for (const at::Tensor& part : parts) {
    TORCH_INTERNAL_ASSERT(part.is_contiguous() && part.numel() == out.numel() &&
                          part.scalar_type() == out.scalar_type());
    pointers.push_back(part.data_ptr());
  }
  TORCH_INTERNAL_ASSERT(out.is_contiguous());
  reduceBuffers(out.data_ptr(), pointers, out.numel(), out.scalar_type(), op);
}

}  // namespace mydev::distributed
