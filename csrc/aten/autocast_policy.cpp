// torch.autocast("mydev"): the same cast policy as CUDA's, taken from the op
// lists ATen publishes for other backends to reuse. Matmuls and convolutions
// run in the autocast dtype (bfloat16/float16); numerically sensitive ops
// (exp/log family, norms, losses, softmax, sums) run in float32; ops mixing
// dtypes promote to the widest.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace mydev {
namespace {

using at::autocast::CastPolicy;

// binary_cross_entropy is unsafe in low precision; CUDA refuses it under
// autocast with the same advice.
at::Tensor binaryCrossEntropyRefused(const at::Tensor&, const at::Tensor&,
                                     const std::optional<at::Tensor>&,
                                     int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss "
              "are unsafe to autocast.\nMany models use a sigmoid layer right "
              "before the binary cross entropy layer. In this case, combine "
              "the two layers using torch.nn.functional."
              "binary_cross_entropy_with_logits or torch.nn.BCEWithLogitsLoss. "
              "binary_cross_entropy_with_logits and BCEWithLogits are safe to "
              "autocast.");
}

}  // namespace

// Ops outside the policy lists run unchanged under autocast. torch
// registers this pass-through for its own backends' autocast keys, not for
// PrivateUse1's.
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

// The shared lists spell signatures with ATen's unqualified type names.
using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;
#ifndef ADD_NS
#define ADD_NS(RAW_OP) at::RAW_OP
#endif

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define MYDEV_LOWER_PRECISION(...) \
  KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define MYDEV_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define MYDEV_FP32_SET_OPT_DTYPE(...) \
  KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define MYDEV_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)

  AT_FORALL_LOWER_PRECISION_FP(MYDEV_LOWER_PRECISION)
  AT_FORALL_FP32(MYDEV_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(MYDEV_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(
      KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  AT_FORALL_PROMOTE(MYDEV_PROMOTE)

#undef MYDEV_LOWER_PRECISION
#undef MYDEV_FP32
#undef MYDEV_FP32_SET_OPT_DTYPE
#undef MYDEV_PROMOTE

  m.impl("binary_cross_entropy", TORCH_FN(binaryCrossEntropyRefused));
}

}  // namespace mydev
