#include "native_meta_kernels.h"

#include <ATen/ExpandUtils.h>
#include <ATen/TensorIterator.h>
#include <ATen/core/boxing/KernelFunction.h>
#include <ATen/native/Resize.h>
#include <ATen/native/cpu/mixed_data_type.h>
#include <ATen/native/layer_norm.h>
#include <ATen/ops/_log_softmax_backward_data_meta_dispatch.h>
#include <ATen/ops/_log_softmax_meta_dispatch.h>
#include <ATen/ops/_softmax_backward_data_meta_dispatch.h>
#include <ATen/ops/_softmax_meta_dispatch.h>
#include <ATen/ops/add_meta_dispatch.h>
#include <ATen/ops/addcdiv_meta_dispatch.h>
#include <ATen/ops/addcmul_meta_dispatch.h>
#include <ATen/ops/addmm_meta_dispatch.h>
#include <ATen/ops/all_meta_dispatch.h>
#include <ATen/ops/amax_meta_dispatch.h>
#include <ATen/ops/any_meta_dispatch.h>
#include <ATen/ops/argmax_meta_dispatch.h>
#include <ATen/ops/argmin_meta_dispatch.h>
#include <ATen/ops/bmm_meta_dispatch.h>
#include <ATen/ops/cat_meta_dispatch.h>
#include <ATen/ops/ceil_meta_dispatch.h>
#include <ATen/ops/clamp_meta_dispatch.h>
#include <ATen/ops/clamp_min_meta_dispatch.h>
#include <ATen/ops/cos_meta_dispatch.h>
#include <ATen/ops/cumsum_meta_dispatch.h>
#include <ATen/ops/div_meta_dispatch.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/eq_meta_dispatch.h>
#include <ATen/ops/erf_meta_dispatch.h>
#include <ATen/ops/exp2_meta_dispatch.h>
#include <ATen/ops/exp_meta_dispatch.h>
#include <ATen/ops/fill_meta_dispatch.h>
#include <ATen/ops/floor_meta_dispatch.h>
#include <ATen/ops/ge_meta_dispatch.h>
#include <ATen/ops/gelu_meta_dispatch.h>
#include <ATen/ops/gt_meta_dispatch.h>
#include <ATen/ops/index_add_meta_dispatch.h>
#include <ATen/ops/index_meta_dispatch.h>
#include <ATen/ops/le_meta_dispatch.h>
#include <ATen/ops/lerp_meta_dispatch.h>
#include <ATen/ops/linalg_vector_norm_meta_dispatch.h>
#include <ATen/ops/log1p_meta_dispatch.h>
#include <ATen/ops/log2_meta_dispatch.h>
#include <ATen/ops/log_meta_dispatch.h>
#include <ATen/ops/lt_meta_dispatch.h>
#include <ATen/ops/max_meta_dispatch.h>
#include <ATen/ops/maximum_meta_dispatch.h>
#include <ATen/ops/mean_meta_dispatch.h>
#include <ATen/ops/min_meta_dispatch.h>
#include <ATen/ops/minimum_meta_dispatch.h>
#include <ATen/ops/mm_meta_dispatch.h>
#include <ATen/ops/mul_meta_dispatch.h>
#include <ATen/ops/ne_meta_dispatch.h>
#include <ATen/ops/neg_meta_dispatch.h>
#include <ATen/ops/nll_loss_backward_meta_dispatch.h>
#include <ATen/ops/nll_loss_forward_meta_dispatch.h>
#include <ATen/ops/normal_meta_dispatch.h>
#include <ATen/ops/pow_meta_dispatch.h>
#include <ATen/ops/reciprocal_meta_dispatch.h>
#include <ATen/ops/round_meta_dispatch.h>
#include <ATen/ops/rsqrt_meta_dispatch.h>
#include <ATen/ops/sigmoid_meta_dispatch.h>
#include <ATen/ops/sign_meta_dispatch.h>
#include <ATen/ops/silu_meta_dispatch.h>
#include <ATen/ops/sin_meta_dispatch.h>
#include <ATen/ops/sqrt_meta_dispatch.h>
#include <ATen/ops/sub_meta_dispatch.h>
#include <ATen/ops/sum_meta_dispatch.h>
#include <ATen/ops/tanh_meta_dispatch.h>
#include <ATen/ops/threshold_backward_meta_dispatch.h>
#include <ATen/ops/tril_meta_dispatch.h>
#include <ATen/ops/triu_meta_dispatch.h>
#include <ATen/ops/trunc_meta_dispatch.h>
#include <ATen/ops/uniform_meta_dispatch.h>
#include <ATen/ops/zero_meta_dispatch.h>

#include <unordered_map>

namespace mydev {
namespace {

using at::Scalar;
using at::Tensor;

using Unary = Tensor(const Tensor&);
using UnaryInPlace = Tensor&(Tensor&);
using Binary = Tensor(const Tensor&, const Tensor&);
using BinaryInPlace = Tensor&(Tensor&, const Tensor&);
using BinaryAlpha = Tensor(const Tensor&, const Tensor&, const Scalar&);
using BinaryAlphaInPlace = Tensor&(Tensor&, const Tensor&, const Scalar&);
using Ternary = Tensor(const Tensor&, const Tensor&, const Tensor&,
                       const Scalar&);
using TernaryInPlace = Tensor&(Tensor&, const Tensor&, const Tensor&,
                               const Scalar&);
using AddMm = Tensor(const Tensor&, const Tensor&, const Tensor&, const Scalar&,
                     const Scalar&);
using AddMmInPlace = Tensor&(Tensor&, const Tensor&, const Tensor&,
                             const Scalar&, const Scalar&);
using Reduction = Tensor(const Tensor&, at::OptionalIntArrayRef, bool,
                         std::optional<at::ScalarType>);
using Softmax = Tensor(const Tensor&, int64_t, bool);
using Amax = Tensor(const Tensor&, at::IntArrayRef, bool);
using VectorNorm = Tensor(const Tensor&, const Scalar&, at::OptionalIntArrayRef,
                          bool, std::optional<at::ScalarType>);
using Indices = c10::List<std::optional<Tensor>>;
using Index = Tensor(const Tensor&, const Indices&);
using Gelu = Tensor(const Tensor&, c10::string_view);
using WithScalar = Tensor(const Tensor&, const Scalar&);
// out= overloads, arguments in schema order (at::meta::*_outf).
using UnaryOut = Tensor&(const Tensor&, Tensor&);
using BinaryOut = Tensor&(const Tensor&, const Tensor&, Tensor&);
using BinaryAlphaOut = Tensor&(const Tensor&, const Tensor&, const Scalar&,
                               Tensor&);
using TernaryOut = Tensor&(const Tensor&, const Tensor&, const Tensor&,
                           const Scalar&, Tensor&);
using AddMmOut = Tensor&(const Tensor&, const Tensor&, const Tensor&,
                         const Scalar&, const Scalar&, Tensor&);
using ReductionOut = Tensor&(const Tensor&, at::OptionalIntArrayRef, bool,
                             std::optional<at::ScalarType>, Tensor&);
using SoftmaxOut = Tensor&(const Tensor&, int64_t, bool, Tensor&);
using AmaxOut = Tensor&(const Tensor&, at::IntArrayRef, bool, Tensor&);
using VectorNormOut = Tensor&(const Tensor&, const Scalar&,
                              at::OptionalIntArrayRef, bool,
                              std::optional<at::ScalarType>, Tensor&);
using IndexOut = Tensor&(const Tensor&, const Indices&, Tensor&);
using GeluOut = Tensor&(const Tensor&, c10::string_view, Tensor&);
using WithScalarOut = Tensor&(const Tensor&, const Scalar&, Tensor&);
using SoftmaxBackwardOut = Tensor&(const Tensor&, const Tensor&, int64_t,
                                   at::ScalarType, Tensor&);
using NllLossOut = std::tuple<Tensor&, Tensor&>(const Tensor&, const Tensor&,
                                                const std::optional<Tensor>&,
                                                int64_t, int64_t, Tensor&,
                                                Tensor&);
using NllLossBackwardOut = Tensor&(const Tensor&, const Tensor&, const Tensor&,
                                   const std::optional<Tensor>&, int64_t,
                                   int64_t, const Tensor&, Tensor&);
using FillInPlace = Tensor&(Tensor&, const Scalar&);
using OptionalScalar = std::optional<Scalar>;
using Clamp = Tensor(const Tensor&, const OptionalScalar&,
                     const OptionalScalar&);
using ClampOut = Tensor&(const Tensor&, const OptionalScalar&,
                         const OptionalScalar&, Tensor&);
using OptionalTensor = std::optional<Tensor>;
using ClampTensor = Tensor(const Tensor&, const OptionalTensor&,
                           const OptionalTensor&);
using ClampTensorOut = Tensor&(const Tensor&, const OptionalTensor&,
                               const OptionalTensor&, Tensor&);
using Cumulative = Tensor(const Tensor&, int64_t,
                          std::optional<at::ScalarType>);
using CumulativeOut = Tensor&(const Tensor&, int64_t,
                              std::optional<at::ScalarType>, Tensor&);
using DimReduction = Tensor(const Tensor&, int64_t, bool);
using DimReductionOut = Tensor&(const Tensor&, int64_t, bool, Tensor&);
using ArgReduction = Tensor(const Tensor&, std::optional<int64_t>, bool);
using ArgReductionOut = Tensor&(const Tensor&, std::optional<int64_t>, bool,
                                Tensor&);
using ValuesIndices = std::tuple<Tensor, Tensor>(const Tensor&, int64_t, bool);
using ValuesIndicesOut = std::tuple<Tensor&, Tensor&>(const Tensor&, int64_t,
                                                      bool, Tensor&, Tensor&);
using Diagonal = Tensor(const Tensor&, int64_t);
using DiagonalOut = Tensor&(const Tensor&, int64_t, Tensor&);
using Concatenate = Tensor(const at::ITensorListRef&, int64_t);
using ConcatenateOut = Tensor&(const at::ITensorListRef&, int64_t, Tensor&);
using IndexAdd = Tensor(const Tensor&, int64_t, const Tensor&, const Tensor&,
                        const Scalar&);
using IndexAddOut = Tensor&(const Tensor&, int64_t, const Tensor&,
                            const Tensor&, const Scalar&, Tensor&);
using MaskedFillScalar = Tensor(const Tensor&, const Tensor&, const Scalar&);
using LayerNorm = std::tuple<Tensor, Tensor, Tensor>(const Tensor&,
                                                     at::IntArrayRef,
                                                     const OptionalTensor&,
                                                     const OptionalTensor&,
                                                     double);
using TensorTriple = Tensor(const Tensor&, const Tensor&, const Tensor&);
using RandomInPlace = Tensor&(Tensor&, double, double,
                              std::optional<at::Generator>);

// relu is clamp_min(self, 0) on the CPU too, except that it refuses bool.
Tensor reluMeta(const Tensor& self) {
  TORCH_CHECK(self.scalar_type() != at::kBool,
              "Boolean inputs not supported for relu");
  return at::meta::clamp_min(self, 0);
}

// Boolean and byte indices select by the data (x[mask]): the Meta kernel
// would run nonzero on a meta tensor. Refused here, so that the device-kernel
// path computes the op synchronously, as it does other data-dependent shapes.
void checkIndicesKeepShapeOffData(const Indices& indices) {
  for (size_t i = 0; i < indices.size(); ++i) {
    const std::optional<Tensor> index = indices.get(i);
    TORCH_CHECK(!index.has_value() || !index->defined() ||
                    (index->scalar_type() != at::kBool &&
                     index->scalar_type() != at::kByte),
                "aten::index: the shape of a boolean index's result depends "
                "on the data");
  }
}

Tensor indexMeta(const Tensor& self, const Indices& indices) {
  checkIndicesKeepShapeOffData(indices);
  return at::meta::index(self, indices);
}

Tensor& indexOutMeta(const Tensor& self, const Indices& indices, Tensor& out) {
  checkIndicesKeepShapeOffData(indices);
  return at::meta::index_outf(self, indices, out);
}

// The matrix products' Meta kernels take operands of two dtypes; their CPU
// kernels refuse them. Refused here too, the device-kernel path runs the
// call synchronously, so the CPU kernel's own error is raised at the call,
// not from the stream at the next synchronize.
void checkOneDtype(std::initializer_list<const Tensor*> operands) {
  const at::ScalarType first = (*operands.begin())->scalar_type();
  for (const Tensor* operand : operands) {
    TORCH_CHECK(operand->scalar_type() == first,
                "matrix product operands of different dtypes");
  }
}

template <Binary* kernel>
Tensor productMeta(const Tensor& self, const Tensor& other) {
  checkOneDtype({&self, &other});
  return kernel(self, other);
}

template <BinaryOut* kernel>
Tensor& productOutMeta(const Tensor& self, const Tensor& other, Tensor& out) {
  checkOneDtype({&self, &other, &out});
  return kernel(self, other, out);
}

Tensor addmmMeta(const Tensor& self, const Tensor& mat1, const Tensor& mat2,
                 const Scalar& beta, const Scalar& alpha) {
  checkOneDtype({&self, &mat1, &mat2});
  return at::meta::addmm(self, mat1, mat2, beta, alpha);
}

Tensor& addmmInPlaceMeta(Tensor& self, const Tensor& mat1, const Tensor& mat2,
                         const Scalar& beta, const Scalar& alpha) {
  checkOneDtype({&self, &mat1, &mat2});
  return at::meta::addmm_(self, mat1, mat2, beta, alpha);
}

Tensor& addmmOutMeta(const Tensor& self, const Tensor& mat1, const Tensor& mat2,
                     const Scalar& beta, const Scalar& alpha, Tensor& out) {
  checkOneDtype({&self, &mat1, &mat2, &out});
  return at::meta::addmm_outf(self, mat1, mat2, beta, alpha, out);
}

// masked_fill's composite kernel, which the device runs whole
// (composite_routing.cpp), fills a contiguous clone of `self` expanded to
// the mask's broadcast shape; torch's Meta kernel for it is Python
// (torch._refs), and the first one a process runs imports torch._dynamo.
Tensor maskedFillMeta(const Tensor& self, const Tensor& mask) {
  TORCH_CHECK(mask.scalar_type() == at::kBool,
              "masked_fill_ only supports boolean masks, but got mask with "
              "dtype ",
              mask.scalar_type());
  return at::empty(at::infer_size(mask.sizes(), self.sizes()), self.options());
}

Tensor maskedFillScalarMeta(const Tensor& self, const Tensor& mask,
                            const Scalar& /*value*/) {
  return maskedFillMeta(self, mask);
}

Tensor maskedFillTensorMeta(const Tensor& self, const Tensor& mask,
                            const Tensor& value) {
  TORCH_CHECK(value.dim() == 0,
              "masked_fill_ only supports a 0-dimensional value tensor, but "
              "got tensor with ",
              value.dim(), " dimension(s).");
  return maskedFillMeta(self, mask);
}

// where.self has a CPU kernel and a Python Meta kernel. The CPU kernel
// lays its output out with a TensorIterator over the condition and the two
// values converted to their promoted dtype; so does this.
Tensor whereMeta(const Tensor& condition, const Tensor& self,
                 const Tensor& other) {
  TORCH_CHECK(condition.scalar_type() == at::kBool ||
                  condition.scalar_type() == at::kByte,
              "where expected condition to be a boolean tensor, but got a "
              "tensor with dtype ",
              condition.scalar_type());
  const at::ScalarType dtype = at::result_type(self, other);
  const Tensor promoted_self =
      self.scalar_type() == dtype ? self : self.to(dtype);
  const Tensor promoted_other =
      other.scalar_type() == dtype ? other : other.to(dtype);
  Tensor out = at::empty({0}, self.options().dtype(dtype));
  at::TensorIteratorConfig()
      .check_all_same_dtype(false)
      .add_output(out)
      .add_const_input(condition)
      .add_const_input(promoted_self)
      .add_const_input(promoted_other)
      .build();
  return out;
}

// native_layer_norm, which the device runs whole (composite_routing.cpp),
// as its CPU kernel shapes its results: a contiguous output like the input,
// and the per-row mean and reciprocal standard deviation shaped to
// broadcast against it, in float beside a reduced-precision input whose
// parameters are float. torch's Meta kernel for it is Python.
std::tuple<Tensor, Tensor, Tensor> nativeLayerNormMeta(
    const Tensor& input, at::IntArrayRef normalized_shape,
    const std::optional<Tensor>& weight_opt,
    const std::optional<Tensor>& bias_opt, double /*eps*/) {
  const Tensor weight = weight_opt.value_or(Tensor());
  const Tensor bias = bias_opt.value_or(Tensor());
  const bool mixed = at::native::is_mixed_type(input, weight, bias);
  if (mixed) {
    at::native::check_mixed_data_type(input, weight, bias);
  }
  at::native::_check_layer_norm_inputs(input, normalized_shape, weight, bias);
  const auto statistics_dims =
      static_cast<size_t>(input.dim()) - normalized_shape.size();
  c10::DimVector statistics_shape(input.sizes().begin(),
                                  input.sizes().begin() + statistics_dims);
  statistics_shape.resize(input.dim(), 1);
  const auto statistics_options =
      input.options().dtype(at::native::param_scalar_type(input, mixed));
  return {at::empty(input.sizes(), input.options()),
          at::empty(statistics_shape, statistics_options),
          at::empty(statistics_shape, statistics_options)};
}

// abs's composite kernel calls abs.out with an empty output, which the CPU
// kernel resizes as a unary TensorIterator op would, or, for a complex
// input (computed complex, then copied real), to the input's shape.
// torch's Meta kernel for it is Python.
Tensor& absOutMeta(const Tensor& self, Tensor& out) {
  if (self.is_complex()) {
    at::native::resize_output(out, self.sizes());
  } else {
    at::TensorIterator::unary_op(out, self);
  }
  return out;
}

template <class Signature, Signature* kernel>
c10::KernelFunction boxed() {
  return c10::KernelFunction::makeFromUnboxedFunction(
      c10::CompileTimeFunctionPointer<Signature, kernel>());
}

// The first ops of programs: factories' fills, elementwise arithmetic,
// Linear (addmm, mm), reductions and norms, indexing by tensors, softmax,
// activations, cross-entropy, the backward ops of these, and the optimizers'
// in-place updates, comparisons and the masks made from them, and the other
// structured elementwise ops, reductions, cumsum, cat and tril/triu that a
// first op of a program often is (each of those imported torch._dynamo
// through its Python Meta kernel: a second or more on the host thread).
// Ops missing here keep working through the dispatcher's (Python) kernel.
// On mydev the functional and in-place forms of structured ops run ATen's
// generic structured kernel, which calls the out= overload on the device:
// that is the call the device-kernel path sees, hence the out= entries.
const std::unordered_map<c10::OperatorName, c10::KernelFunction>&
nativeMetaKernels() {
  static const std::unordered_map<c10::OperatorName, c10::KernelFunction>
      kernels{
          {{"aten::fill_", "Scalar"}, boxed<FillInPlace, &at::meta::fill_>()},
          {{"aten::zero_", ""}, boxed<UnaryInPlace, &at::meta::zero_>()},
          {{"aten::normal_", ""}, boxed<RandomInPlace, &at::meta::normal_>()},
          {{"aten::uniform_", ""}, boxed<RandomInPlace, &at::meta::uniform_>()},
          {{"aten::add", "Tensor"}, boxed<BinaryAlpha, &at::meta::add>()},
          {{"aten::add_", "Tensor"},
           boxed<BinaryAlphaInPlace, &at::meta::add_>()},
          {{"aten::sub", "Tensor"}, boxed<BinaryAlpha, &at::meta::sub>()},
          {{"aten::sub_", "Tensor"},
           boxed<BinaryAlphaInPlace, &at::meta::sub_>()},
          {{"aten::mul", "Tensor"}, boxed<Binary, &at::meta::mul>()},
          {{"aten::mul_", "Tensor"}, boxed<BinaryInPlace, &at::meta::mul_>()},
          {{"aten::div", "Tensor"}, boxed<Binary, &at::meta::div>()},
          {{"aten::div_", "Tensor"}, boxed<BinaryInPlace, &at::meta::div_>()},
          {{"aten::pow", "Tensor_Scalar"}, boxed<WithScalar, &at::meta::pow>()},
          {{"aten::addcmul_", ""},
           boxed<TernaryInPlace, &at::meta::addcmul_>()},
          {{"aten::addcmul", ""}, boxed<Ternary, &at::meta::addcmul>()},
          {{"aten::lerp_", "Scalar"},
           boxed<BinaryAlphaInPlace, &at::meta::lerp_>()},
          {{"aten::mm", ""}, boxed<Binary, &productMeta<&at::meta::mm>>()},
          {{"aten::bmm", ""}, boxed<Binary, &productMeta<&at::meta::bmm>>()},
          {{"aten::addmm", ""}, boxed<AddMm, &addmmMeta>()},
          {{"aten::addmm_", ""}, boxed<AddMmInPlace, &addmmInPlaceMeta>()},
          {{"aten::sum", "dim_IntList"}, boxed<Reduction, &at::meta::sum>()},
          {{"aten::mean", "dim"}, boxed<Reduction, &at::meta::mean>()},
          {{"aten::amax", ""}, boxed<Amax, &at::meta::amax>()},
          {{"aten::linalg_vector_norm", ""},
           boxed<VectorNorm, &at::meta::linalg_vector_norm>()},
          {{"aten::index", "Tensor"}, boxed<Index, &indexMeta>()},
          {{"aten::_softmax", ""}, boxed<Softmax, &at::meta::_softmax>()},
          {{"aten::_log_softmax", ""},
           boxed<Softmax, &at::meta::_log_softmax>()},
          {{"aten::relu", ""}, boxed<Unary, &reluMeta>()},
          {{"aten::threshold_backward", ""},
           boxed<BinaryAlpha, &at::meta::threshold_backward>()},
          {{"aten::silu", ""}, boxed<Unary, &at::meta::silu>()},
          {{"aten::gelu", ""}, boxed<Gelu, &at::meta::gelu>()},
          {{"aten::exp", ""}, boxed<Unary, &at::meta::exp>()},
          {{"aten::neg", ""}, boxed<Unary, &at::meta::neg>()},
          {{"aten::tanh", ""}, boxed<Unary, &at::meta::tanh>()},
          {{"aten::sigmoid", ""}, boxed<Unary, &at::meta::sigmoid>()},
          {{"aten::sqrt", ""}, boxed<Unary, &at::meta::sqrt>()},
          {{"aten::sqrt_", ""}, boxed<UnaryInPlace, &at::meta::sqrt_>()},
          {{"aten::rsqrt", ""}, boxed<Unary, &at::meta::rsqrt>()},
          {{"aten::masked_fill", "Scalar"},
           boxed<MaskedFillScalar, &maskedFillScalarMeta>()},
          {{"aten::masked_fill", "Tensor"},
           boxed<TensorTriple, &maskedFillTensorMeta>()},
          {{"aten::add", "out"}, boxed<BinaryAlphaOut, &at::meta::add_outf>()},
          {{"aten::sub", "out"}, boxed<BinaryAlphaOut, &at::meta::sub_outf>()},
          {{"aten::mul", "out"}, boxed<BinaryOut, &at::meta::mul_outf>()},
          {{"aten::div", "out"}, boxed<BinaryOut, &at::meta::div_outf>()},
          {{"aten::pow", "Tensor_Scalar_out"},
           boxed<WithScalarOut, &at::meta::pow_outf>()},
          {{"aten::addcmul", "out"},
           boxed<TernaryOut, &at::meta::addcmul_outf>()},
          {{"aten::lerp", "Scalar_out"},
           boxed<BinaryAlphaOut, &at::meta::lerp_outf>()},
          {{"aten::mm", "out"},
           boxed<BinaryOut, &productOutMeta<&at::meta::mm_outf>>()},
          {{"aten::bmm", "out"},
           boxed<BinaryOut, &productOutMeta<&at::meta::bmm_outf>>()},
          {{"aten::addmm", "out"}, boxed<AddMmOut, &addmmOutMeta>()},
          {{"aten::sum", "IntList_out"},
           boxed<ReductionOut, &at::meta::sum_outf>()},
          {{"aten::mean", "out"}, boxed<ReductionOut, &at::meta::mean_outf>()},
          {{"aten::amax", "out"}, boxed<AmaxOut, &at::meta::amax_outf>()},
          {{"aten::linalg_vector_norm", "out"},
           boxed<VectorNormOut, &at::meta::linalg_vector_norm_outf>()},
          {{"aten::index", "Tensor_out"}, boxed<IndexOut, &indexOutMeta>()},
          {{"aten::_softmax", "out"},
           boxed<SoftmaxOut, &at::meta::_softmax_outf>()},
          {{"aten::_log_softmax", "out"},
           boxed<SoftmaxOut, &at::meta::_log_softmax_outf>()},
          {{"aten::threshold_backward", "grad_input"},
           boxed<BinaryAlphaOut, &at::meta::threshold_backward_outf>()},
          {{"aten::silu", "out"}, boxed<UnaryOut, &at::meta::silu_outf>()},
          {{"aten::gelu", "out"}, boxed<GeluOut, &at::meta::gelu_outf>()},
          {{"aten::exp", "out"}, boxed<UnaryOut, &at::meta::exp_outf>()},
          {{"aten::neg", "out"}, boxed<UnaryOut, &at::meta::neg_outf>()},
          {{"aten::tanh", "out"}, boxed<UnaryOut, &at::meta::tanh_outf>()},
          {{"aten::sigmoid", "out"},
           boxed<UnaryOut, &at::meta::sigmoid_outf>()},
          {{"aten::sqrt", "out"}, boxed<UnaryOut, &at::meta::sqrt_outf>()},
          {{"aten::rsqrt", "out"}, boxed<UnaryOut, &at::meta::rsqrt_outf>()},
          {{"aten::sin", ""}, boxed<Unary, &at::meta::sin>()},
          {{"aten::sin", "out"}, boxed<UnaryOut, &at::meta::sin_outf>()},
          {{"aten::cos", ""}, boxed<Unary, &at::meta::cos>()},
          {{"aten::cos", "out"}, boxed<UnaryOut, &at::meta::cos_outf>()},
          {{"aten::log", ""}, boxed<Unary, &at::meta::log>()},
          {{"aten::log", "out"}, boxed<UnaryOut, &at::meta::log_outf>()},
          {{"aten::log1p", ""}, boxed<Unary, &at::meta::log1p>()},
          {{"aten::log1p", "out"}, boxed<UnaryOut, &at::meta::log1p_outf>()},
          {{"aten::log2", ""}, boxed<Unary, &at::meta::log2>()},
          {{"aten::log2", "out"}, boxed<UnaryOut, &at::meta::log2_outf>()},
          {{"aten::exp2", ""}, boxed<Unary, &at::meta::exp2>()},
          {{"aten::exp2", "out"}, boxed<UnaryOut, &at::meta::exp2_outf>()},
          {{"aten::floor", ""}, boxed<Unary, &at::meta::floor>()},
          {{"aten::floor", "out"}, boxed<UnaryOut, &at::meta::floor_outf>()},
          {{"aten::ceil", ""}, boxed<Unary, &at::meta::ceil>()},
          {{"aten::ceil", "out"}, boxed<UnaryOut, &at::meta::ceil_outf>()},
          {{"aten::trunc", ""}, boxed<Unary, &at::meta::trunc>()},
          {{"aten::trunc", "out"}, boxed<UnaryOut, &at::meta::trunc_outf>()},
          {{"aten::round", ""}, boxed<Unary, &at::meta::round>()},
          {{"aten::round", "out"}, boxed<UnaryOut, &at::meta::round_outf>()},
          {{"aten::sign", ""}, boxed<Unary, &at::meta::sign>()},
          {{"aten::sign", "out"}, boxed<UnaryOut, &at::meta::sign_outf>()},
          {{"aten::erf", ""}, boxed<Unary, &at::meta::erf>()},
          {{"aten::erf", "out"}, boxed<UnaryOut, &at::meta::erf_outf>()},
          {{"aten::reciprocal", ""}, boxed<Unary, &at::meta::reciprocal>()},
          {{"aten::reciprocal", "out"},
           boxed<UnaryOut, &at::meta::reciprocal_outf>()},
          {{"aten::maximum", ""}, boxed<Binary, &at::meta::maximum>()},
          {{"aten::maximum", "out"},
           boxed<BinaryOut, &at::meta::maximum_outf>()},
          {{"aten::minimum", ""}, boxed<Binary, &at::meta::minimum>()},
          {{"aten::minimum", "out"},
           boxed<BinaryOut, &at::meta::minimum_outf>()},
          {{"aten::clamp", ""}, boxed<Clamp, &at::meta::clamp>()},
          {{"aten::clamp", "out"}, boxed<ClampOut, &at::meta::clamp_outf>()},
          {{"aten::clamp", "Tensor"}, boxed<ClampTensor, &at::meta::clamp>()},
          {{"aten::clamp", "Tensor_out"},
           boxed<ClampTensorOut, &at::meta::clamp_outf>()},
          {{"aten::cumsum", ""}, boxed<Cumulative, &at::meta::cumsum>()},
          {{"aten::cumsum", "out"},
           boxed<CumulativeOut, &at::meta::cumsum_outf>()},
          {{"aten::all", ""}, boxed<Unary, &at::meta::all>()},
          {{"aten::all", "all_out"}, boxed<UnaryOut, &at::meta::all_outf>()},
          {{"aten::all", "dim"}, boxed<DimReduction, &at::meta::all>()},
          {{"aten::all", "out"}, boxed<DimReductionOut, &at::meta::all_outf>()},
          {{"aten::any", ""}, boxed<Unary, &at::meta::any>()},
          {{"aten::any", "all_out"}, boxed<UnaryOut, &at::meta::any_outf>()},
          {{"aten::any", "dim"}, boxed<DimReduction, &at::meta::any>()},
          {{"aten::any", "out"}, boxed<DimReductionOut, &at::meta::any_outf>()},
          {{"aten::argmax", ""}, boxed<ArgReduction, &at::meta::argmax>()},
          {{"aten::argmax", "out"},
           boxed<ArgReductionOut, &at::meta::argmax_outf>()},
          {{"aten::argmin", ""}, boxed<ArgReduction, &at::meta::argmin>()},
          {{"aten::argmin", "out"},
           boxed<ArgReductionOut, &at::meta::argmin_outf>()},
          {{"aten::max", "dim"}, boxed<ValuesIndices, &at::meta::max>()},
          {{"aten::max", "dim_max"},
           boxed<ValuesIndicesOut, &at::meta::max_outf>()},
          {{"aten::min", "dim"}, boxed<ValuesIndices, &at::meta::min>()},
          {{"aten::min", "dim_min"},
           boxed<ValuesIndicesOut, &at::meta::min_outf>()},
          {{"aten::tril", ""}, boxed<Diagonal, &at::meta::tril>()},
          {{"aten::tril", "out"}, boxed<DiagonalOut, &at::meta::tril_outf>()},
          {{"aten::triu", ""}, boxed<Diagonal, &at::meta::triu>()},
          {{"aten::triu", "out"}, boxed<DiagonalOut, &at::meta::triu_outf>()},
          {{"aten::abs", "out"}, boxed<UnaryOut, &absOutMeta>()},
          {{"aten::native_layer_norm", ""},
           boxed<LayerNorm, &nativeLayerNormMeta>()},
          {{"aten::where", "self"}, boxed<TensorTriple, &whereMeta>()},
          {{"aten::cat", ""}, boxed<Concatenate, &at::meta::cat>()},
          {{"aten::cat", "out"}, boxed<ConcatenateOut, &at::meta::cat_outf>()},
          {{"aten::addcdiv", ""}, boxed<Ternary, &at::meta::addcdiv>()},
          {{"aten::addcdiv", "out"},
           boxed<TernaryOut, &at::meta::addcdiv_outf>()},
          {{"aten::index_add", ""}, boxed<IndexAdd, &at::meta::index_add>()},
          {{"aten::index_add", "out"},
           boxed<IndexAddOut, &at::meta::index_add_outf>()},
          {{"aten::eq", "Scalar"}, boxed<WithScalar, &at::meta::eq>()},
          {{"aten::eq", "Tensor"}, boxed<Binary, &at::meta::eq>()},
          {{"aten::eq", "Scalar_out"},
           boxed<WithScalarOut, &at::meta::eq_outf>()},
          {{"aten::eq", "Tensor_out"}, boxed<BinaryOut, &at::meta::eq_outf>()},
          {{"aten::ne", "Scalar"}, boxed<WithScalar, &at::meta::ne>()},
          {{"aten::ne", "Tensor"}, boxed<Binary, &at::meta::ne>()},
          {{"aten::ne", "Scalar_out"},
           boxed<WithScalarOut, &at::meta::ne_outf>()},
          {{"aten::ne", "Tensor_out"}, boxed<BinaryOut, &at::meta::ne_outf>()},
          {{"aten::lt", "Scalar"}, boxed<WithScalar, &at::meta::lt>()},
          {{"aten::lt", "Tensor"}, boxed<Binary, &at::meta::lt>()},
          {{"aten::lt", "Scalar_out"},
           boxed<WithScalarOut, &at::meta::lt_outf>()},
          {{"aten::lt", "Tensor_out"}, boxed<BinaryOut, &at::meta::lt_outf>()},
          {{"aten::le", "Scalar"}, boxed<WithScalar, &at::meta::le>()},
          {{"aten::le", "Tensor"}, boxed<Binary, &at::meta::le>()},
          {{"aten::le", "Scalar_out"},
           boxed<WithScalarOut, &at::meta::le_outf>()},
          {{"aten::le", "Tensor_out"}, boxed<BinaryOut, &at::meta::le_outf>()},
          {{"aten::gt", "Scalar"}, boxed<WithScalar, &at::meta::gt>()},
          {{"aten::gt", "Tensor"}, boxed<Binary, &at::meta::gt>()},
          {{"aten::gt", "Scalar_out"},
           boxed<WithScalarOut, &at::meta::gt_outf>()},
          {{"aten::gt", "Tensor_out"}, boxed<BinaryOut, &at::meta::gt_outf>()},
          {{"aten::ge", "Scalar"}, boxed<WithScalar, &at::meta::ge>()},
          {{"aten::ge", "Tensor"}, boxed<Binary, &at::meta::ge>()},
          {{"aten::ge", "Scalar_out"},
           boxed<WithScalarOut, &at::meta::ge_outf>()},
          {{"aten::ge", "Tensor_out"}, boxed<BinaryOut, &at::meta::ge_outf>()},
          {{"aten::_softmax_backward_data", "out"},
           boxed<SoftmaxBackwardOut, &at::meta::_softmax_backward_data_outf>()},
          {{"aten::_log_softmax_backward_data", "out"},
           boxed<SoftmaxBackwardOut,
                 &at::meta::_log_softmax_backward_data_outf>()},
          {{"aten::nll_loss_forward", "output"},
           boxed<NllLossOut, &at::meta::nll_loss_forward_outf>()},
          {{"aten::nll_loss_backward", "grad_input"},
           boxed<NllLossBackwardOut, &at::meta::nll_loss_backward_outf>()},
      };
  return kernels;
}

}  // namespace

bool hasNativeMetaKernel(const c10::OperatorName& name) {
  return nativeMetaKernels().count(name) != 0;
}

bool runNativeMetaKernel(const c10::OperatorHandle& op,
                         torch::jit::Stack* stack) {
  const auto& kernels = nativeMetaKernels();
  const auto found = kernels.find(op.operator_name());
  if (found == kernels.end()) {
    return false;
  }
  found->second.callBoxed(op, c10::DispatchKeySet(c10::DispatchKey::Meta),
                          stack);
  return true;
}

}  // namespace mydev
