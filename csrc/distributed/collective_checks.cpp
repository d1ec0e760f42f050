#include "collective_checks.h"

#include <c10/util/Exception.h>

#include "../aten/host_view.h"

namespace mydev::distributed {

void throwDistError(const std::string& message) {
  C10_THROW_ERROR(DistBackendError, message);
}

void checkTensor(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, "myccl: ", what,
              " takes mydev tensors, got a tensor on ", t.device(),
              " (use \"mydev:myccl,cpu:gloo\" for CPU tensors)");
  TORCH_CHECK(t.layout() == c10::kStrided, "myccl: ", what, " takes dense tensors");
  TORCH_CHECK(t.is_contiguous(), "myccl: ", what, " takes contiguous tensors");
  switch (t.scalar_type()) {
    case at::kFloat:
    case at::kDouble:
    case at::kHalf:
    case at::kBFloat16:
    case at::kByte:
    case at::kChar:
    case at::kShort:
    case at::kInt:
    case at::kLong:
    case at::kBool:
      break;
    default:
      TORCH_CHECK(false, "myccl: ", what, " does not support dtype ", t.scalar_type());
  }
}

std::vector<at::Tensor> perRankViews(const std::vector<at::Tensor>& tensors,
                                     const at::Tensor& like, const char* what,
                                     const char* role) {
  std::vector<at::Tensor> views;
  views.reserve(tensors.size());
  for (const at::Tensor& t : tensors) {
    checkTensor(t, what);
    TORCH_CHECK(t.numel() == like.numel() && t.scalar_type() == like.scalar_type() &&
                    t.device() == like.device(),
                "myccl: ", what, " ", role, " tensors must match the ",
                role == std::string("input") ? "output" : "input",
                "'s size, dtype and device");
    views.push_back(hostView(t).view(-1));
  }
  return views;
}

void checkReduceOp(const c10d::ReduceOp& op, at::ScalarType dtype, const char* what) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
    case c10d::ReduceOp::PRODUCT:
    case c10d::ReduceOp::MIN:
    case c10d::ReduceOp::MAX:
    case c10d::ReduceOp::AVG:
      break;
    default:
      TORCH_CHECK(false, "myccl: ", what, " supports the reduce ops SUM, AVG, PRODUCT, "
                  "MIN and MAX (not bitwise or PREMUL_SUM yet)");
  }
  TORCH_CHECK(dtype != at::kBool, "myccl: ", what, " does not reduce bool tensors");
}

}  // namespace mydev::distributed
