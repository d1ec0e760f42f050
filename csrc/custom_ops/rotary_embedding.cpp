// mydev::rotary_embedding and mydev::rotary_embedding_backward: the host side
// (checks, layout, allocation, launch). The kernel bodies are in
// rotary_embedding_kernel.h.
#include <ATen/ops/empty.h>

#include <vector>

#include "custom_ops.h"
#include "fused_launch.h"
#include "kernel_table.h"
#include "op_checks.h"

namespace mydev::custom_ops {
namespace {

// x [..., seq, head_dim] with head_dim even; cos and sin of one shape,
// head_dim last, broadcasting to x's shape.
void checkRotaryInputs(const char* op, const char* x_name, const at::Tensor& x,
                       const at::Tensor& cos, const at::Tensor& sin) {
  checkActivation(op, x_name, x);
  TORCH_CHECK(x.dim() >= 2, op, ": ", x_name,
              " must have at least 2 dimensions [..., seq, head_dim], got a ",
              x.dim(), "-d tensor");
  TORCH_CHECK(x.dim() <= RotaryParams::kMaxDims + 1, op, ": ", x_name,
              " must have at most ", RotaryParams::kMaxDims + 1,
              " dimensions, got ", x.dim());
  const int64_t head_dim = x.size(-1);
  TORCH_CHECK(head_dim % 2 == 0, op, ": ", x_name,
              "'s last dimension (head_dim) must be even, got ", head_dim);
  for (const auto& [name, t] :
       {std::pair<const char*, const at::Tensor&>{"cos", cos},
        std::pair<const char*, const at::Tensor&>{"sin", sin}}) {
    checkActivation(op, name, t);
    checkSameDevice(op, name, t, x_name, x);
    checkParamDtype(op, name, t, x);
    bool broadcasts =
        t.dim() >= 1 && t.dim() <= x.dim() && t.size(-1) == head_dim;
    for (int64_t d = 1; broadcasts && d <= t.dim(); ++d) {
      broadcasts = t.size(-d) == 1 || t.size(-d) == x.size(-d);
    }
    TORCH_CHECK(broadcasts, op, ": ", name,
                " must have shape [seq, head_dim] = [", x.size(-2), ", ",
                head_dim, "] or another shape that broadcasts to ", x_name,
                "'s shape ", x.sizes(), " with head_dim last, got ", t.sizes());
  }
  TORCH_CHECK(
      sin.sizes() == cos.sizes() && sin.scalar_type() == cos.scalar_type(), op,
      ": sin must have cos's shape ", cos.sizes(), " and dtype ",
      cos.scalar_type(), ", got ", sin.sizes(), " ", sin.scalar_type());
}

// Where each of x's rows finds its cos/sin row: x's leading dims, each with
// the stride of cos (contiguous in its own shape) along it, 0 where cos
// broadcasts; adjacent dims that step through cos as one are coalesced.
void describeRows(const at::Tensor& x, const at::Tensor& cos, RotaryParams& p) {
  std::vector<std::pair<int64_t, int64_t>>
      groups;                         // (size, stride), innermost first
  int64_t cos_stride = cos.size(-1);  // cos's stride along dim d
  for (int64_t d = x.dim() - 2; d >= 0; --d) {
    const int64_t cos_dim = d - (x.dim() - cos.dim());
    const int64_t cos_size = cos_dim >= 0 ? cos.size(cos_dim) : 1;
    const int64_t size = x.size(d);
    const int64_t stride = cos_size == 1 ? 0 : cos_stride;
    cos_stride *= cos_size;
    if (size == 1) {
      continue;
    }
    if (!groups.empty() &&
        stride == groups.back().second * groups.back().first) {
      groups.back().first *= size;
    } else {
      groups.emplace_back(size, stride);
    }
  }
  // At most x.dim() - 1 groups: checkRotaryInputs bounds x.dim().
  TORCH_INTERNAL_ASSERT(groups.size() <= RotaryParams::kMaxDims);
  p.ndim = static_cast<int>(groups.size());
  for (int d = 0; d < p.ndim; ++d) {
    p.row_sizes[d] = groups[p.ndim - 1 - d].first;
    p.row_strides[d] = groups[p.ndim - 1 - d].second;
  }
}

// The kernels, on host tensors: x (or the gradient) and out contiguous,
// cos/sin contiguous in their own shape.
void rotaryOnHost(bool backward, const at::Tensor& x, const at::Tensor& cos,
                  const at::Tensor& sin, const at::Tensor& out) {
  RotaryParams p{};
  p.x = x.const_data_ptr();
  p.cos = cos.const_data_ptr();
  p.sin = sin.const_data_ptr();
  p.out = out.mutable_data_ptr();
  p.head_dim = x.size(-1);
  p.rows = x.numel() / p.head_dim;
  p.x_type = x.scalar_type();
  p.cos_type = cos.scalar_type();
  describeRows(x, cos, p);
  if (backward) {
    kernelTable().rotary_backward(p);
  } else {
    kernelTable().rotary_forward(p);
  }
}

}  // namespace

at::Tensor rotaryEmbedding(const at::Tensor& x, const at::Tensor& cos,
                           const at::Tensor& sin) {
  checkRotaryInputs("mydev::rotary_embedding", "x", x, cos, sin);
  at::Tensor out = at::empty(x.sizes(), x.options());
  if (out.numel() == 0) {
    return out;
  }
  runFusedKernel(
      "mydev::rotary_embedding", x.device(),
      [](const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
         const at::Tensor& out) {
        rotaryOnHost(/*backward=*/false, x, cos, sin, out);
      },
      contiguousInput(x), contiguousInput(cos), contiguousInput(sin), out);
  return out;
}

at::Tensor rotaryEmbeddingBackward(const at::Tensor& grad_out,
                                   const at::Tensor& cos,
                                   const at::Tensor& sin) {
  checkRotaryInputs("mydev::rotary_embedding_backward", "grad_out", grad_out,
                    cos, sin);
  at::Tensor grad_x = at::empty(grad_out.sizes(), grad_out.options());
  if (grad_x.numel() == 0) {
    return grad_x;
  }
  runFusedKernel(
      "mydev::rotary_embedding_backward", grad_out.device(),
      [](const at::Tensor& grad_out, const at::Tensor& cos,
         const at::Tensor& sin, const at::Tensor& grad_x) {
        rotaryOnHost(/*backward=*/true, grad_out, cos, sin, grad_x);
      },
      contiguousInput(grad_out), contiguousInput(cos), contiguousInput(sin),
      grad_x);
  return grad_x;
}

}  // namespace mydev::custom_ops
