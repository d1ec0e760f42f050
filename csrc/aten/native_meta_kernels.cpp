#include "native_meta_kernels.h"

#include <ATen/ExpandUtils.h>
#include <ATen/TensorIterator.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/ReduceOpsUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/native/cpu/mixed_data_type.h>
#include <ATen/native/layer_norm.h>
#include <ATen/ops/addmm_meta_dispatch.h>
#include <ATen/ops/bmm_meta_dispatch.h>
#include <ATen/ops/cat_meta_dispatch.h>
#include <ATen/ops/clamp_min_meta_dispatch.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/fill_meta_dispatch.h>
#include <ATen/ops/index_meta_dispatch.h>
#include <ATen/ops/mm_meta_dispatch.h>
#include <ATen/ops/ne_meta_dispatch.h>
#include <ATen/ops/normal_meta_dispatch.h>
#include <ATen/ops/uniform_meta_dispatch.h>
#include <ATen/ops/zero_meta_dispatch.h>

#include "native_meta_table.h"

namespace mydev {
namespace {

using at::Scalar;
using at::Tensor;

using OptionalTensor = std::optional<Tensor>;
using Unary = Tensor(const Tensor&);
using UnaryInPlace = Tensor&(Tensor&);
using UnaryOut = Tensor&(const Tensor&, Tensor&);
using Binary = Tensor(const Tensor&, const Tensor&);
using BinaryOut = Tensor&(const Tensor&, const Tensor&, Tensor&);
using TensorTriple = Tensor(const Tensor&, const Tensor&, const Tensor&);
using MaskedFillInPlaceScalar = Tensor&(Tensor&, const Tensor&, const Scalar&);
using MaskedFillInPlaceTensor = Tensor&(Tensor&, const Tensor&, const Tensor&);
using Hardtanh = Tensor(const Tensor&, const Scalar&, const Scalar&);
using HardtanhBackward = Tensor(const Tensor&, const Tensor&, const Scalar&,
                                const Scalar&);
using Flip = Tensor(const Tensor&, at::IntArrayRef);
using Roll = Tensor(const Tensor&, at::IntArrayRef, at::IntArrayRef);
using Variance = Tensor(const Tensor&, at::OptionalIntArrayRef,
                        const std::optional<Scalar>&, bool);
using BatchNorm = std::tuple<Tensor, Tensor, Tensor>(
    const Tensor&, const OptionalTensor&, const OptionalTensor&,
    const OptionalTensor&, const OptionalTensor&, bool, double, double);
using GroupNorm = std::tuple<Tensor, Tensor, Tensor>(const Tensor&,
                                                     const OptionalTensor&,
                                                     const OptionalTensor&,
                                                     int64_t, int64_t, int64_t,
                                                     int64_t, double);
using Convolution = Tensor(const Tensor&, const Tensor&, const OptionalTensor&,
                           at::IntArrayRef, at::IntArrayRef, at::IntArrayRef,
                           bool, at::IntArrayRef, int64_t);
using NanToNumOut = Tensor&(const Tensor&, std::optional<double>,
                            std::optional<double>, std::optional<double>,
                            Tensor&);
using VarianceMean = std::tuple<Tensor, Tensor>(const Tensor&,
                                                at::OptionalIntArrayRef,
                                                const std::optional<Scalar>&,
                                                bool);
using AddMm = Tensor(const Tensor&, const Tensor&, const Tensor&, const Scalar&,
                     const Scalar&);
using AddMmInPlace = Tensor&(Tensor&, const Tensor&, const Tensor&,
                             const Scalar&, const Scalar&);
using AddMmOut = Tensor&(const Tensor&, const Tensor&, const Tensor&,
                         const Scalar&, const Scalar&, Tensor&);
using Indices = c10::List<std::optional<Tensor>>;
using Index = Tensor(const Tensor&, const Indices&);
using IndexOut = Tensor&(const Tensor&, const Indices&, Tensor&);
using FillInPlace = Tensor&(Tensor&, const Scalar&);
using RandomInPlace = Tensor&(Tensor&, double, double,
                              std::optional<at::Generator>);
using MaskedFillScalar = Tensor(const Tensor&, const Tensor&, const Scalar&);
using LayerNorm = std::tuple<Tensor, Tensor, Tensor>(const Tensor&,
                                                     at::IntArrayRef,
                                                     const OptionalTensor&,
                                                     const OptionalTensor&,
                                                     double);

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

// masked_fill_'s CPU kernel: the value checked as in the functional form,
// then a TensorIterator writing `self` in place over the mask, which may
// broadcast to `self` but not grow it.
Tensor& maskedFillInPlaceMeta(Tensor& self, const Tensor& mask) {
  TORCH_CHECK(mask.scalar_type() == at::kBool,
              "masked_fill_ only supports boolean masks, but got mask with "
              "dtype ",
              mask.scalar_type());
  at::TensorIteratorConfig()
      .set_check_mem_overlap(false)
      .check_all_same_dtype(false)
      .resize_outputs(false)
      .add_output(self)
      .add_const_input(mask)
      .build();
  return self;
}

Tensor& maskedFillInPlaceScalarMeta(Tensor& self, const Tensor& mask,
                                    const Scalar& /*value*/) {
  return maskedFillInPlaceMeta(self, mask);
}

Tensor& maskedFillInPlaceTensorMeta(Tensor& self, const Tensor& mask,
                                    const Tensor& value) {
  TORCH_CHECK(value.dim() == 0,
              "masked_fill_ only supports a 0-dimensional value tensor, but "
              "got tensor with ",
              value.dim(), " dimension(s).");
  return maskedFillInPlaceMeta(self, mask);
}

// isnan's CPU kernel is `self != self`.
Tensor isnanMeta(const Tensor& self) { return at::meta::ne(self, self); }

// logical_not's composite kernel calls logical_not.out with an empty bool
// output, which the CPU kernel lays out with a TensorIterator that keeps
// the output's dtype.
Tensor& logicalNotOutMeta(const Tensor& self, Tensor& out) {
  at::TensorIteratorConfig()
      .check_all_same_dtype(false)
      .add_output(out)
      .add_const_input(self)
      .build();
  return out;
}

// hardtanh's CPU kernel clamps into empty_like(self), refusing bool and,
// for uint8, negative limits (integer inputs take the limits as integers,
// so they never promote).
Tensor hardtanhMeta(const Tensor& self, const Scalar& min, const Scalar& max) {
  TORCH_CHECK(self.scalar_type() != at::kBool,
              "Bool inputs not supported for hardtanh");
  TORCH_CHECK(self.scalar_type() != at::kByte ||
                  (min.toLong() >= 0 && max.toLong() >= 0),
              "cannot do hardtanh on an unsigned type with negative limits");
  return at::native::empty_like(self);
}

Tensor hardtanhBackwardMeta(const Tensor& grad_output, const Tensor& self,
                            const Scalar& /*min*/, const Scalar& /*max*/) {
  Tensor grad_input;
  return at::TensorIterator::borrowing_binary_op(grad_input, grad_output, self)
      .output();
}

// flip's CPU kernel writes into empty_like(self) after checking the dims
// (in range, none repeated).
Tensor flipMeta(const Tensor& self, at::IntArrayRef dims) {
  at::dim_list_to_bitset(dims, self.dim());
  return at::native::empty_like(self, std::nullopt, std::nullopt, std::nullopt,
                                std::nullopt, at::MemoryFormat::Preserve);
}

// roll's CPU kernel: along one dim, the two pieces of `self` concatenated;
// along several, one dim after another; with no dim, the flattened tensor
// rolled and viewed back.
Tensor rollMeta(const Tensor& self, at::IntArrayRef shifts,
                at::IntArrayRef dims) {
  if (dims.size() != 1 || shifts.size() != 1) {
    TORCH_CHECK(!shifts.empty(), "`shifts` required");
    if (dims.empty() && shifts.size() == 1) {
      return at::empty(self.sizes(), self.options());
    }
    TORCH_CHECK(shifts.size() == dims.size(),
                "shifts and dimensions must align. shifts: ", shifts.size(),
                ", dims:", dims.size());
    return rollMeta(rollMeta(self, shifts[0], dims[0]), shifts.slice(1),
                    dims.slice(1));
  }
  if (self.numel() == 0) {
    return at::native::empty_like(self, std::nullopt, std::nullopt,
                                  std::nullopt, std::nullopt,
                                  at::MemoryFormat::Preserve);
  }
  const int64_t dim = at::maybe_wrap_dim(dims[0], self.dim());
  const int64_t size = self.size(dim);
  const int64_t start = ((size - shifts[0]) % size + size) % size;
  return at::meta::cat(
      {self.narrow(dim, start, size - start), self.narrow(dim, 0, start)}, dim);
}

// std and var (and their _mean forms, whose mean has the input's dtype)
// check the input's dtype and reduce into a contiguous result of the real
// dtype.
Tensor varianceMeta(const Tensor& self, at::OptionalIntArrayRef dim,
                    bool keepdim) {
  TORCH_CHECK(self.layout() == at::Layout::Strided,
              "std and var only supports strided layout, got: ", self.layout());
  TORCH_CHECK(at::isFloatingType(self.scalar_type()) ||
                  at::isComplexType(self.scalar_type()),
              "std and var only support floating point and complex dtypes");
  const auto mask =
      at::native::make_dim_mask(dim.value_or(at::IntArrayRef{}), self.dim());
  return at::empty(
      at::native::shape_from_dim_mask(self, mask, keepdim),
      self.options().dtype(c10::toRealValueType(self.scalar_type())));
}

Tensor stdVarMeta(const Tensor& self, at::OptionalIntArrayRef dim,
                  const std::optional<Scalar>& /*correction*/, bool keepdim) {
  return varianceMeta(self, dim, keepdim);
}

std::tuple<Tensor, Tensor> stdVarMeanMeta(
    const Tensor& self, at::OptionalIntArrayRef dim,
    const std::optional<Scalar>& /*correction*/, bool keepdim) {
  Tensor variance = varianceMeta(self, dim, keepdim);
  Tensor mean = at::empty(variance.sizes(), self.options());
  return {std::move(variance), std::move(mean)};
}

// The CPU kernel's test of a batch-norm operand being dense in some layout,
// and the layout it then keeps (a channels-last tensor whose
// suggest_memory_format() is ambiguous is kept channels-last).
bool denseInSomeLayout(const Tensor& t) {
  return t.is_contiguous() || t.is_contiguous(at::MemoryFormat::ChannelsLast) ||
         t.is_contiguous(at::MemoryFormat::ChannelsLast3d);
}

at::MemoryFormat denseLayoutOf(const Tensor& t) {
  if (t.is_contiguous()) {
    return at::MemoryFormat::Contiguous;
  }
  return t.is_contiguous(at::MemoryFormat::ChannelsLast3d)
             ? at::MemoryFormat::ChannelsLast3d
             : at::MemoryFormat::ChannelsLast;
}

// native_batch_norm's CPU kernel: the output like the input (in its dense
// layout when every operand is dense), and the saved statistics, one per
// channel when training and empty otherwise, in float when the parameters
// are float beside a reduced-precision input.
std::tuple<Tensor, Tensor, Tensor> nativeBatchNormMeta(
    const Tensor& input, const OptionalTensor& weight_opt,
    const OptionalTensor& bias_opt, const OptionalTensor& running_mean_opt,
    const OptionalTensor& running_var_opt, bool training, double /*momentum*/,
    double /*eps*/) {
  const Tensor weight = weight_opt.value_or(Tensor());
  const Tensor bias = bias_opt.value_or(Tensor());
  const Tensor running_mean = running_mean_opt.value_or(Tensor());
  const Tensor running_var = running_var_opt.value_or(Tensor());
  TORCH_CHECK(input.dim() >= 2 && at::isFloatingType(input.scalar_type()),
              "batch_norm: left to the CPU kernel");
  const bool all_dense = denseInSomeLayout(input) &&
                         (!weight.defined() || weight.is_contiguous()) &&
                         (!bias.defined() || bias.is_contiguous()) &&
                         running_mean.is_contiguous() &&
                         running_var.is_contiguous();
  Tensor output = at::native::empty_like(
      input, std::nullopt, std::nullopt, std::nullopt, std::nullopt,
      all_dense ? denseLayoutOf(input) : input.suggest_memory_format());
  const bool mixed =
      at::native::is_mixed_type(input, weight, bias, running_mean, running_var);
  const auto statistics_options =
      input.options().dtype(mixed ? at::kFloat : input.scalar_type());
  const int64_t statistics_size = training ? input.size(1) : 0;
  return {std::move(output), at::empty({statistics_size}, statistics_options),
          at::empty({statistics_size}, statistics_options)};
}

// native_group_norm's CPU kernel: the output in the input's suggested
// layout (which the input must be dense in), the per-sample, per-group
// mean and reciprocal standard deviation in the parameters' dtype.
std::tuple<Tensor, Tensor, Tensor> nativeGroupNormMeta(
    const Tensor& input, const OptionalTensor& weight_opt,
    const OptionalTensor& bias_opt, int64_t n, int64_t channels,
    int64_t /*hxw*/, int64_t groups, double /*eps*/) {
  const Tensor weight = weight_opt.value_or(Tensor());
  const Tensor bias = bias_opt.value_or(Tensor());
  const at::MemoryFormat layout = input.suggest_memory_format();
  TORCH_CHECK(
      groups > 0 && channels % groups == 0 && input.is_contiguous(layout) &&
          (!weight.defined() ||
           (weight.dim() == 1 && weight.numel() == channels &&
            weight.is_contiguous())) &&
          (!bias.defined() || (bias.dim() == 1 && bias.numel() == channels &&
                               bias.is_contiguous())),
      "group_norm: left to the CPU kernel");
  const bool mixed = at::native::is_mixed_type(input, weight, bias);
  if (mixed) {
    at::native::check_mixed_data_type(input, weight, bias);
  }
  const auto statistics_options =
      input.options().dtype(at::native::param_scalar_type(input, mixed));
  return {at::native::empty_like(input, std::nullopt, std::nullopt,
                                 std::nullopt, std::nullopt, layout),
          at::empty({n, groups}, statistics_options),
          at::empty({n, groups}, statistics_options)};
}

// logical_and/or/xor's composite kernels call the out= overload with an
// empty bool output, which the CPU kernel lays out as a comparison. It
// first checks, on the data, that a 0-dim operand of another dtype
// converts to the other operand's: such calls are left to the CPU kernel.
Tensor& logicalBinaryOutMeta(const Tensor& self, const Tensor& other,
                             Tensor& out) {
  TORCH_CHECK(self.scalar_type() == other.scalar_type() ||
                  (self.dim() == 0) == (other.dim() == 0),
              "logical op: the CPU kernel reads the 0-dim operand");
  at::TensorIterator::comparison_op(out, self, other);
  return out;
}

// hardswish's CPU kernel: a unary TensorIterator op.
Tensor hardswishMeta(const Tensor& self) {
  Tensor result;
  return at::TensorIterator::unary_op(result, self).output();
}

// nan_to_num's composite kernel calls nan_to_num.out with empty_like(self);
// the CPU kernel keeps the output's dtype (the input's, or it refuses),
// resizes it for integer inputs and lays it out with a unary TensorIterator
// otherwise.
Tensor& nanToNumOutMeta(const Tensor& self, std::optional<double> /*nan*/,
                        std::optional<double> /*posinf*/,
                        std::optional<double> /*neginf*/, Tensor& out) {
  TORCH_CHECK(self.scalar_type() == out.scalar_type(),
              "nan_to_num: left to the CPU kernel");
  if (c10::isIntegralType(self.scalar_type(), /*includeBool=*/true)) {
    at::native::resize_output(out, self.sizes());
  } else {
    at::TensorIterator::unary_op(out, self);
  }
  return out;
}

// dot's (and vdot's) CPU kernel: a 0-dim result from two 1-D operands of
// one dtype and length.
Tensor dotMeta(const Tensor& self, const Tensor& other) {
  TORCH_CHECK(self.dim() == 1 && other.dim() == 1 &&
                  self.scalar_type() == other.scalar_type() &&
                  self.numel() == other.numel(),
              "dot: left to the CPU kernel");
  return at::empty({}, self.options());
}

// aten::convolution's CPU kernel picks a backend (oneDNN or ATen's own
// convolutions) and computes in the layout that backend prefers. For 4-D
// inputs every CPU backend writes channels-last when the input or the weight
// suggests it, contiguous otherwise. 3-D and 5-D calls with contiguous
// operands are contiguous; the other layouts, and anything unusual (empty
// inputs, mismatched shapes), are left to the CPU kernel, run synchronously.
Tensor convolutionMeta(const Tensor& input, const Tensor& weight,
                       const OptionalTensor& bias, at::IntArrayRef stride,
                       at::IntArrayRef padding, at::IntArrayRef dilation,
                       bool transposed, at::IntArrayRef output_padding,
                       int64_t groups) {
  const int64_t dims = weight.dim();
  const auto spatial = static_cast<size_t>(dims - 2);
  const int64_t in_channels =
      transposed ? weight.size(0) : weight.size(1) * groups;
  TORCH_CHECK(dims >= 3 && dims <= 5 && input.dim() == dims &&
                  input.numel() > 0 && groups > 0 &&
                  input.size(1) == in_channels && stride.size() == spatial &&
                  padding.size() == spatial && dilation.size() == spatial &&
                  (!transposed || output_padding.size() == spatial) &&
                  input.scalar_type() == weight.scalar_type() &&
                  (!bias.has_value() || !bias->defined() ||
                   bias->scalar_type() == input.scalar_type()),
              "convolution: left to the CPU kernel");
  c10::DimVector shape{input.size(0),
                       transposed ? weight.size(1) * groups : weight.size(0)};
  for (size_t d = 0; d < spatial; ++d) {
    const int64_t in = input.size(d + 2);
    const int64_t kernel_extent = dilation[d] * (weight.size(d + 2) - 1) + 1;
    const int64_t out =
        transposed ? (in - 1) * stride[d] - 2 * padding[d] + kernel_extent +
                         output_padding[d]
                   : (in + 2 * padding[d] - kernel_extent) / stride[d] + 1;
    TORCH_CHECK(out > 0 && stride[d] > 0,
                "convolution: left to the CPU kernel");
    shape.push_back(out);
  }
  at::MemoryFormat layout = at::MemoryFormat::Contiguous;
  if (dims == 4) {
    if (input.suggest_memory_format() == at::MemoryFormat::ChannelsLast ||
        weight.suggest_memory_format() == at::MemoryFormat::ChannelsLast) {
      layout = at::MemoryFormat::ChannelsLast;
    }
  } else {
    TORCH_CHECK(input.is_contiguous() && weight.is_contiguous(),
                "convolution: left to the CPU kernel");
  }
  return at::empty(shape, input.options().memory_format(layout));
}

// The structured ops' at::meta kernels (the generated table), and Meta
// kernels for common ops that have none in C++ or whose at::meta kernel
// accepts what the CPU kernel refuses: factories' fills and random
// initialization, relu, indexing by tensors, the matrix products,
// masked_fill, where, abs, convolution, layer_norm, batch_norm, group_norm,
// isnan, the logical ops, hardtanh (ReLU6), hardswish, nan_to_num, dot,
// flip, roll, std and var. Ops missing here keep working through the
// dispatcher's (Python) kernel. On mydev the functional and in-place forms of
// structured ops that are not routed to the device-kernel path
// (structured_op_routing.cpp) run ATen's generic structured kernel, which calls
// the out= overload on the device: hence the out= entries.
const NativeMetaTable& nativeMetaKernels() {
  static const NativeMetaTable table = [] {
    NativeMetaTable kernels;
    addStructuredMetaKernels(kernels);
    kernels.add<FillInPlace>("aten::fill_", "Scalar", &at::meta::fill_);
    kernels.add<UnaryInPlace>("aten::zero_", "", &at::meta::zero_);
    kernels.add<RandomInPlace>("aten::normal_", "", &at::meta::normal_);
    kernels.add<RandomInPlace>("aten::uniform_", "", &at::meta::uniform_);
    kernels.add<Unary>("aten::relu", "", &reluMeta);
    kernels.add<Index>("aten::index", "Tensor", &indexMeta);
    kernels.add<IndexOut>("aten::index", "Tensor_out", &indexOutMeta);
    kernels.add<Binary>("aten::mm", "", &productMeta<&at::meta::mm>);
    kernels.add<BinaryOut>("aten::mm", "out",
                           &productOutMeta<&at::meta::mm_outf>);
    kernels.add<Binary>("aten::bmm", "", &productMeta<&at::meta::bmm>);
    kernels.add<BinaryOut>("aten::bmm", "out",
                           &productOutMeta<&at::meta::bmm_outf>);
    kernels.add<AddMm>("aten::addmm", "", &addmmMeta);
    kernels.add<AddMmInPlace>("aten::addmm_", "", &addmmInPlaceMeta);
    kernels.add<AddMmOut>("aten::addmm", "out", &addmmOutMeta);
    kernels.add<MaskedFillScalar>("aten::masked_fill", "Scalar",
                                  &maskedFillScalarMeta);
    kernels.add<TensorTriple>("aten::masked_fill", "Tensor",
                              &maskedFillTensorMeta);
    kernels.add<TensorTriple>("aten::where", "self", &whereMeta);
    kernels.add<UnaryOut>("aten::abs", "out", &absOutMeta);
    kernels.add<LayerNorm>("aten::native_layer_norm", "", &nativeLayerNormMeta);
    kernels.add<MaskedFillInPlaceScalar>("aten::masked_fill_", "Scalar",
                                         &maskedFillInPlaceScalarMeta);
    kernels.add<MaskedFillInPlaceTensor>("aten::masked_fill_", "Tensor",
                                         &maskedFillInPlaceTensorMeta);
    kernels.add<Unary>("aten::isnan", "", &isnanMeta);
    kernels.add<UnaryOut>("aten::logical_not", "out", &logicalNotOutMeta);
    kernels.add<Hardtanh>("aten::hardtanh", "", &hardtanhMeta);
    kernels.add<HardtanhBackward>("aten::hardtanh_backward", "",
                                  &hardtanhBackwardMeta);
    kernels.add<Flip>("aten::flip", "", &flipMeta);
    kernels.add<Roll>("aten::roll", "", &rollMeta);
    kernels.add<BatchNorm>("aten::native_batch_norm", "", &nativeBatchNormMeta);
    kernels.add<GroupNorm>("aten::native_group_norm", "", &nativeGroupNormMeta);
    for (const char* name :
         {"aten::logical_and", "aten::logical_or", "aten::logical_xor"}) {
      kernels.add<BinaryOut>(name, "out", &logicalBinaryOutMeta);
    }
    kernels.add<Unary>("aten::hardswish", "", &hardswishMeta);
    kernels.add<Convolution>("aten::convolution", "", &convolutionMeta);
    kernels.add<NanToNumOut>("aten::nan_to_num", "out", &nanToNumOutMeta);
    kernels.add<Binary>("aten::dot", "", &dotMeta);
    kernels.add<Binary>("aten::vdot", "", &dotMeta);
    kernels.add<Variance>("aten::std", "correction", &stdVarMeta);
    kernels.add<Variance>("aten::var", "correction", &stdVarMeta);
    kernels.add<VarianceMean>("aten::std_mean", "correction", &stdVarMeanMeta);
    kernels.add<VarianceMean>("aten::var_mean", "correction", &stdVarMeanMeta);
    return kernels;
  }();
  return table;
}

}  // namespace

bool hasNativeMetaKernel(const c10::OperatorName& name) {
  return nativeMetaKernels().find(name) != nullptr;
}

bool runNativeMetaKernel(const c10::OperatorHandle& op,
                         torch::jit::Stack* stack) {
  const c10::KernelFunction* kernel =
      nativeMetaKernels().find(op.operator_name());
  if (kernel == nullptr) {
    return false;
  }
  kernel->callBoxed(op, c10::DispatchKeySet(c10::DispatchKey::Meta), stack);
  return true;
}

}  // namespace mydev
