// Argument checks every myccl backend applies before it launches anything,
// so a bad call fails on the calling thread with a clear message and the
// process group stays usable. `what` names the collective in messages;
// `role` is "input" or "output".
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <string>
#include <vector>

namespace mydev::distributed {

// Raised as torch.distributed.DistBackendError.
[[noreturn]] void throwDistError(const std::string& message);

// A dense, contiguous mydev tensor of a dtype myccl moves.
void checkTensor(const at::Tensor& t, const char* what);

// One tensor per rank (the `role` tensors of `what`), each checked to be a
// mydev tensor with `like`'s size, dtype and device; returns their flat host
// views, which the collective's kernel reads or writes.
std::vector<at::Tensor> perRankViews(const std::vector<at::Tensor>& tensors,
                                     const at::Tensor& like, const char* what,
                                     const char* role);

void checkReduceOp(const c10d::ReduceOp& op, at::ScalarType dtype,
                   const char* what);

// The single tensor of a collective that takes one per process (broadcast,
// allreduce, reduce; gather's input and scatter's output name their `role`),
// checked.
const at::Tensor& onlyTensor(const std::vector<at::Tensor>& tensors,
                             const char* what, const char* role = nullptr);

// `root` as a rank of a group of `size`.
int checkRoot(int64_t root, int size, const char* what);

// The per-rank list of a rooted collective (gather's outputs, scatter's
// inputs): one tensor per rank like `like` on the root, none elsewhere.
struct RootedList {
  std::vector<at::Tensor> tensors;  // as given; empty off the root
  std::vector<at::Tensor> views;    // their flat host views
};
RootedList rootedList(const std::vector<std::vector<at::Tensor>>& lists,
                      const at::Tensor& like, bool is_root, int size,
                      const char* what, const char* role);

// The list forms of allgather (one input, a list of outputs) and
// reduce_scatter (one output, a list of inputs): one tensor and one list per
// process, the list (its side: `list_role`) holding one tensor per rank like
// the single tensor, which is checked too. Returns the list's flat host views.
std::vector<at::Tensor> listFormViews(
    const std::vector<at::Tensor>& singles,
    const std::vector<std::vector<at::Tensor>>& lists, int size,
    const char* what, const char* list_role);

// _allgather_base and _reduce_scatter_base: the `whole_role` tensor holds
// one piece per rank, each the size and dtype of the other tensor.
void checkRankPieces(const at::Tensor& input, const at::Tensor& output,
                     int size, const char* what, const char* whole_role);

// all_to_all_single's rows of dim 0 per rank, for the input and the output:
// the given split sizes, or an equal split when none are given.
struct AlltoallRows {
  std::vector<int64_t> input;
  std::vector<int64_t> output;
};
AlltoallRows alltoallRows(const at::Tensor& input, const at::Tensor& output,
                          const std::vector<int64_t>& input_split_sizes,
                          const std::vector<int64_t>& output_split_sizes,
                          int size);

// all_to_all's lists: one input and one output tensor per rank, all of one
// dtype and device; returns their flat host views.
struct AlltoallViews {
  std::vector<at::Tensor> inputs;
  std::vector<at::Tensor> outputs;
};
AlltoallViews alltoallViews(const std::vector<at::Tensor>& inputs,
                            const std::vector<at::Tensor>& outputs, int size);

// The tensor of a send or recv (`what`) from `rank` to or from `peer`.
const at::Tensor& pointToPointTensor(const std::vector<at::Tensor>& tensors,
                                     int peer, int rank, int size,
                                     const char* what);

}  // namespace mydev::distributed
