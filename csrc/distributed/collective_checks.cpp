#include "collective_checks.h"

#include <c10/util/Exception.h>

#include "../aten/host_view.h"
#include "../core/device.h"

namespace mydev::distributed {

namespace {

const char* otherRole(const char* role) {
  return role == std::string("input") ? "output" : "input";
}

// Rows of dim 0 per rank: the given split sizes, or an equal split.
std::vector<int64_t> splitRows(const at::Tensor& t,
                               const std::vector<int64_t>& split_sizes,
                               int size, const char* role) {
  TORCH_CHECK(t.dim() >= 1, "myccl: all_to_all ", role,
              " needs at least one dimension");
  const int64_t rows = t.size(0);
  if (split_sizes.empty()) {
    TORCH_CHECK(rows % size == 0, "myccl: all_to_all ", role, " has ", rows,
                " rows, not divisible by the world size ", size,
                " (pass split sizes)");
    return std::vector<int64_t>(static_cast<size_t>(size), rows / size);
  }
  TORCH_CHECK(static_cast<int>(split_sizes.size()) == size,
              "myccl: all_to_all ", role,
              " split sizes must have one entry per rank (", size, "), got ",
              split_sizes.size());
  int64_t total = 0;
  for (const int64_t n : split_sizes) {
    TORCH_CHECK(n >= 0, "myccl: all_to_all ", role,
                " split sizes must not be negative");
    total += n;
  }
  TORCH_CHECK(total == rows, "myccl: all_to_all ", role,
              " split sizes add up to ", total, " rows, the tensor has ", rows);
  return split_sizes;
}

}  // namespace

void throwDistError(const std::string& message) {
  C10_THROW_ERROR(DistBackendError, message);
}

void checkTensor(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1,
              "myccl: ", what, " takes ", kDeviceName,
              " tensors, got a tensor on ", t.device(), " (use \"", kDeviceName,
              ":myccl,cpu:gloo\" for CPU tensors)");
  TORCH_CHECK(t.layout() == c10::kStrided, "myccl: ", what,
              " takes dense tensors");
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
    case at::kBool: break;
    default:
      TORCH_CHECK(false, "myccl: ", what, " does not support dtype ",
                  t.scalar_type());
  }
}

std::vector<at::Tensor> perRankViews(const std::vector<at::Tensor>& tensors,
                                     const at::Tensor& like, const char* what,
                                     const char* role) {
  std::vector<at::Tensor> views;
  views.reserve(tensors.size());
  for (const at::Tensor& t : tensors) {
    checkTensor(t, what);
    TORCH_CHECK(t.numel() == like.numel() &&
                    t.scalar_type() == like.scalar_type() &&
                    t.device() == like.device(),
                "myccl: ", what, " ", role, " tensors must match the ",
                otherRole(role), "'s size, dtype and device");
    views.push_back(hostView(t).view(-1));
  }
  return views;
}

void checkReduceOp(const c10d::ReduceOp& op, at::ScalarType dtype,
                   const char* what) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
    case c10d::ReduceOp::PRODUCT:
    case c10d::ReduceOp::MIN:
    case c10d::ReduceOp::MAX:
    case c10d::ReduceOp::AVG: break;
    default:
      TORCH_CHECK(false, "myccl: ", what,
                  " supports the reduce ops SUM, AVG, PRODUCT, "
                  "MIN and MAX (not bitwise or PREMUL_SUM yet)");
  }
  TORCH_CHECK(dtype != at::kBool, "myccl: ", what,
              " does not reduce bool tensors");
}

const at::Tensor& onlyTensor(const std::vector<at::Tensor>& tensors,
                             const char* what, const char* role) {
  TORCH_CHECK(tensors.size() == 1, "myccl: ", what, " takes one ",
              role == nullptr ? "" : role, role == nullptr ? "" : " ",
              "tensor per process");
  checkTensor(tensors[0], what);
  return tensors[0];
}

int checkRoot(int64_t root, int size, const char* what) {
  TORCH_CHECK(root >= 0 && root < size, "myccl: ", what, " root ", root,
              " is not a rank of this group");
  return static_cast<int>(root);
}

RootedList rootedList(const std::vector<std::vector<at::Tensor>>& lists,
                      const at::Tensor& like, bool is_root, int size,
                      const char* what, const char* role) {
  if (!is_root) {
    TORCH_CHECK(lists.empty() || lists[0].empty(), "myccl: ", what, " takes ",
                role, " tensors only on the root");
    return {};
  }
  TORCH_CHECK(lists.size() == 1 && static_cast<int>(lists[0].size()) == size,
              "myccl: ", what, " needs ", size, " ", role,
              " tensors on the root");
  return {lists[0], perRankViews(lists[0], like, what, role)};
}

std::vector<at::Tensor> listFormViews(
    const std::vector<at::Tensor>& singles,
    const std::vector<std::vector<at::Tensor>>& lists, int size,
    const char* what, const char* list_role) {
  TORCH_CHECK(singles.size() == 1 && lists.size() == 1, "myccl: ", what,
              " takes one ", otherRole(list_role), " and one ", list_role,
              " list per process");
  checkTensor(singles[0], what);
  const std::vector<at::Tensor>& list = lists[0];
  TORCH_CHECK(static_cast<int>(list.size()) == size, "myccl: ", what, " needs ",
              size, " ", list_role, " tensors, got ", list.size());
  return perRankViews(list, singles[0], what, list_role);
}

void checkRankPieces(const at::Tensor& input, const at::Tensor& output,
                     int size, const char* what, const char* whole_role) {
  checkTensor(input, what);
  checkTensor(output, what);
  const char* piece_role = otherRole(whole_role);
  const bool output_is_whole = whole_role == std::string("output");
  const at::Tensor& whole = output_is_whole ? output : input;
  const at::Tensor& piece = output_is_whole ? input : output;
  TORCH_CHECK(whole.numel() == piece.numel() * size &&
                  whole.scalar_type() == piece.scalar_type(),
              "myccl: ", what, " ", whole_role, " must hold world_size * ",
              piece_role, ".numel() elements of the ", piece_role, "'s dtype");
  TORCH_CHECK(output.device() == input.device(), "myccl: ", what,
              " tensors on two devices");
}

AlltoallRows alltoallRows(const at::Tensor& input, const at::Tensor& output,
                          const std::vector<int64_t>& input_split_sizes,
                          const std::vector<int64_t>& output_split_sizes,
                          int size) {
  checkTensor(input, "all_to_all");
  checkTensor(output, "all_to_all");
  TORCH_CHECK(
      input.scalar_type() == output.scalar_type() &&
          input.device() == output.device(),
      "myccl: all_to_all needs input and output of one dtype and device");
  return {splitRows(input, input_split_sizes, size, "input"),
          splitRows(output, output_split_sizes, size, "output")};
}

AlltoallViews alltoallViews(const std::vector<at::Tensor>& inputs,
                            const std::vector<at::Tensor>& outputs, int size) {
  TORCH_CHECK(
      static_cast<int>(inputs.size()) == size &&
          static_cast<int>(outputs.size()) == size,
      "myccl: all_to_all takes one input and one output tensor per rank (",
      size, "), got ", inputs.size(), " and ", outputs.size());
  AlltoallViews views;
  for (int r = 0; r < size; ++r) {
    for (const at::Tensor* t : {&inputs[r], &outputs[r]}) {
      checkTensor(*t, "all_to_all");
      TORCH_CHECK(t->scalar_type() == inputs[0].scalar_type() &&
                      t->device() == inputs[0].device(),
                  "myccl: all_to_all tensors must share one dtype and device");
    }
    views.inputs.push_back(hostView(inputs[r]).view(-1));
    views.outputs.push_back(hostView(outputs[r]).view(-1));
  }
  return views;
}

const at::Tensor& pointToPointTensor(const std::vector<at::Tensor>& tensors,
                                     int peer, int rank, int size,
                                     const char* what) {
  TORCH_CHECK(tensors.size() == 1, "myccl: ", what, " takes one tensor");
  checkTensor(tensors[0], what);
  TORCH_CHECK(peer >= 0 && peer < size && peer != rank, "myccl: ", what,
              " on rank ", rank, ": peer ", peer,
              " is not another rank of this group (size ", size, ")");
  return tensors[0];
}

}  // namespace mydev::distributed
