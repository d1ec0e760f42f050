#include "reduction.h"

#include <c10/util/Exception.h>

namespace mydev::distributed {

void reduceInto(const at::Tensor& out, const std::vector<at::Tensor>& parts,
                c10d::ReduceOp::RedOpType op) {
  const at::ScalarType dtype = out.scalar_type();
  const bool reduced = dtype == at::kHalf || dtype == at::kBFloat16;
  const at::ScalarType acc_type = reduced ? at::kFloat : dtype;
  at::Tensor acc = parts[0].to(acc_type, /*non_blocking=*/false, /*copy=*/true);
  for (size_t r = 1; r < parts.size(); ++r) {
    const at::Tensor part = reduced ? parts[r].to(at::kFloat) : parts[r];
    switch (op) {
      case c10d::ReduceOp::SUM:
      case c10d::ReduceOp::AVG:
        acc.add_(part);
        break;
      case c10d::ReduceOp::PRODUCT:
        acc.mul_(part);
        break;
      case c10d::ReduceOp::MIN:
        at::minimum_out(acc, acc, part);
        break;
      case c10d::ReduceOp::MAX:
        at::maximum_out(acc, acc, part);
        break;
      default:
        TORCH_INTERNAL_ASSERT(false, "unchecked reduce op");
    }
  }
  if (op == c10d::ReduceOp::AVG) {
    const auto n = static_cast<int64_t>(parts.size());
    if (at::isFloatingType(acc_type)) {
      acc.div_(n);
    } else {
      acc.div_(at::Scalar(n), "trunc");
    }
  }
  out.copy_(acc);
}

}  // namespace mydev::distributed
