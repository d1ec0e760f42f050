#include "native_meta_kernels.h"

#include <ATen/ExpandUtils.h>
#include <ATen/TensorIterator.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/ReduceOpsUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/addmm_meta_dispatch.h>
#include <ATen/ops/bmm_meta_dispatch.h>
#include <ATen/ops/cat_meta_dispatch.h>
#include <ATen/ops/clamp_min_meta_dispatch.h>
#include <ATen/ops/div_meta_dispatch.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/fill_meta_dispatch.h>
#include <ATen/ops/index_meta_dispatch.h>
#include <ATen/ops/mm_meta_dispatch.h>
#include <ATen/ops/ne_meta_dispatch.h>
#include <ATen/ops/normal_meta_dispatch.h>
#include <ATen/ops/sum_meta_dispatch.h>
#include <ATen/ops/uniform_meta_dispatch.h>
#include <ATen/ops/zero_meta_dispatch.h>

#include "meta_layouts.h"
#include "native_meta_table.h"

namespace mydev {
namespace {

using at::Scalar;
using at::Tensor;

using Unary = Tensor(const Tensor&);
using UnaryInPlace = Tensor&(Tensor&);
using UnaryOut = Tensor&(const Tensor&, Tensor&);
using Binary = Tensor(const Tensor&, const Tensor&);
using BinaryOut = Tensor&(const Tensor&, const Tensor&, Tensor&);
using BinaryInPlace = Tensor&(Tensor&, const Tensor&);
using TensorTriple = Tensor(const Tensor&, const Tensor&, const Tensor&);
using MaskedFillInPlaceScalar = Tensor&(Tensor&, const Tensor&, const Scalar&);
using MaskedFillInPlaceTensor = Tensor&(Tensor&, const Tensor&, const Tensor&);
using Hardtanh = Tensor(const Tensor&, const Scalar&, const Scalar&);
using HardtanhBackward = Tensor(const Tensor&, const Tensor&, const Scalar&,
                                const Scalar&);
using WithDims = Tensor(const Tensor&, at::IntArrayRef);
using Roll = Tensor(const Tensor&, at::IntArrayRef, at::IntArrayRef);
using Variance = Tensor(const Tensor&, at::OptionalIntArrayRef,
                        const std::optional<Scalar>&, bool);
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

// addmm's Meta kernel leaves the bias to the CPU kernel, which expands it
// to the product's shape. Expanded here too, a bias that does not fit
// raises the CPU kernel's error at the call (as on cuda), not from the
// stream at the next synchronize.
void checkBiasExpandsTo(const Tensor& bias, const Tensor& product) {
  bias.expand(product.sizes());
}

Tensor addmmMeta(const Tensor& self, const Tensor& mat1, const Tensor& mat2,
                 const Scalar& beta, const Scalar& alpha) {
  checkOneDtype({&self, &mat1, &mat2});
  Tensor product = at::meta::addmm(self, mat1, mat2, beta, alpha);
  checkBiasExpandsTo(self, product);
  return product;
}

Tensor& addmmInPlaceMeta(Tensor& self, const Tensor& mat1, const Tensor& mat2,
                         const Scalar& beta, const Scalar& alpha) {
  checkOneDtype({&self, &mat1, &mat2});
  return at::meta::addmm_(self, mat1, mat2, beta, alpha);
}

Tensor& addmmOutMeta(const Tensor& self, const Tensor& mat1, const Tensor& mat2,
                     const Scalar& beta, const Scalar& alpha, Tensor& out) {
  checkOneDtype({&self, &mat1, &mat2, &out});
  at::meta::addmm_outf(self, mat1, mat2, beta, alpha, out);
  checkBiasExpandsTo(self, out);
  return out;
}

// addbmm's CPU kernel sums the batch's products into a contiguous [n, p]
// result, into which `self` expands.
Tensor addbmmMeta(const Tensor& self, const Tensor& batch1,
                  const Tensor& batch2, const Scalar& /*beta*/,
                  const Scalar& /*alpha*/) {
  checkOneDtype({&self, &batch1, &batch2});
  TORCH_CHECK(batch1.dim() == 3 && batch2.dim() == 3 &&
                  batch1.size(0) == batch2.size(0) &&
                  batch1.size(2) == batch2.size(1),
              "addbmm: left to the CPU kernel");
  const c10::DimVector shape{batch1.size(1), batch2.size(2)};
  TORCH_CHECK(at::infer_size(self.sizes(), shape) == at::IntArrayRef(shape),
              "addbmm: left to the CPU kernel");
  return at::empty(shape, self.options());
}

// addr's CPU kernel: one TensorIterator over `self` expanded to the outer
// product's shape and the two vectors as a column and a row, computing in
// their promoted dtype. Boolean products, whose scalars the kernel checks,
// are left to it.
Tensor addrMeta(const Tensor& self, const Tensor& vec1, const Tensor& vec2,
                const Scalar& /*beta*/, const Scalar& /*alpha*/) {
  TORCH_CHECK(vec1.dim() == 1 && vec2.dim() == 1,
              "addr: left to the CPU kernel");
  const c10::DimVector shape{vec1.size(0), vec2.size(0)};
  TORCH_CHECK(at::infer_size(self.sizes(), shape) == at::IntArrayRef(shape),
              "addr: left to the CPU kernel");
  Tensor result;
  at::TensorIteratorConfig config;
  config.add_output(result)
      .add_owned_const_input(self.expand(shape))
      .add_owned_const_input(vec1.reshape({vec1.size(0), 1}))
      .add_const_input(vec2)
      .promote_inputs_to_common_dtype(true)
      .cast_common_dtype_to_outputs(true)
      .enforce_safe_casting_to_output(true);
  const at::TensorIterator iterator = config.build();
  TORCH_CHECK(iterator.common_dtype() != at::kBool,
              "addr: left to the CPU kernel");
  return iterator.output();
}

// masked_fill's checks, the same in its functional and in-place forms and
// worded as the CPU kernel words them.
void checkMaskedFillMask(const Tensor& mask) {
  TORCH_CHECK(mask.scalar_type() == at::kBool,
              "masked_fill_ only supports boolean masks, but got mask with "
              "dtype ",
              mask.scalar_type());
}

void checkMaskedFillValue(const Tensor& value) {
  TORCH_CHECK(value.dim() == 0,
              "masked_fill_ only supports a 0-dimensional value tensor, but "
              "got tensor with ",
              value.dim(), " dimension(s).");
}

// masked_fill's composite kernel, which the device runs whole
// (composite_routing.cpp), fills a contiguous clone of `self` expanded to
// the mask's broadcast shape; torch's Meta kernel for it is Python
// (torch._refs), and the first one a process runs imports torch._dynamo.
Tensor maskedFillMeta(const Tensor& self, const Tensor& mask) {
  checkMaskedFillMask(mask);
  return at::empty(at::infer_size(mask.sizes(), self.sizes()), self.options());
}

Tensor maskedFillScalarMeta(const Tensor& self, const Tensor& mask,
                            const Scalar& /*value*/) {
  return maskedFillMeta(self, mask);
}

Tensor maskedFillTensorMeta(const Tensor& self, const Tensor& mask,
                            const Tensor& value) {
  checkMaskedFillValue(value);
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
  checkMaskedFillMask(mask);
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
  checkMaskedFillValue(value);
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
  return emptyLikeIn(self, at::MemoryFormat::Preserve);
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
    return emptyLikeIn(self, at::MemoryFormat::Preserve);
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

// count_nonzero's CPU kernel is (self != 0).sum(dims), or over no dims a
// 0-dim int64 count.
Tensor countNonzeroMeta(const Tensor& self, at::IntArrayRef dims) {
  if (dims.empty()) {
    return at::empty({}, self.options().dtype(at::kLong));
  }
  return at::meta::sum(at::meta::ne(self, 0), dims, false, std::nullopt);
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

// floor_divide rounds toward -inf: div's "floor" mode, whose structured
// Meta kernel lays the output out as floor_divide's CPU kernel does (a
// binary TensorIterator; integers stay integers). torch's Meta kernel for it
// is Python (torch._refs' decomposition, a dozen ops), and with it every
// `a // b` on mydev ran synchronously, waiting for the whole stream (a beam
// search divides token indices every step).
Tensor floorDivideMeta(const Tensor& self, const Tensor& other) {
  return at::meta::div(self, other, "floor");
}

Tensor& floorDivideInPlaceMeta(Tensor& self, const Tensor& other) {
  return at::meta::div_(self, other, "floor");
}

Tensor& floorDivideOutMeta(const Tensor& self, const Tensor& other,
                           Tensor& out) {
  return at::meta::div_outf(self, other, "floor", out);
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

// The structured ops' at::meta kernels (the generated table), and Meta
// kernels for common ops that have none in C++ or whose at::meta kernel
// accepts what the CPU kernel refuses: factories' fills and random
// initialization, relu, indexing by tensors, the matrix products,
// masked_fill, where, abs, isnan, the logical ops, hardtanh (ReLU6),
// hardswish, floor_divide, nan_to_num, dot, flip, roll, std and var, addbmm,
// addr, count_nonzero; then, each family in its own file, the layers
// (convolution, normalizations, attention, forward and backward), the
// activations and losses, the lookups and the draws; last, the _foreach_*
// ops over the per-tensor ops listed before them. Ops missing here
// keep working through the dispatcher's (Python) kernel. On mydev the
// functional and in-place forms of structured ops that are not routed to the
// device-kernel path (structured_op_routing.cpp) run ATen's generic structured
// kernel, which calls the out= overload on the device: hence the out= entries.
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
    kernels.add<AddMm>("aten::addbmm", "", &addbmmMeta);
    kernels.add<AddMm>("aten::addr", "", &addrMeta);
    kernels.add<MaskedFillScalar>("aten::masked_fill", "Scalar",
                                  &maskedFillScalarMeta);
    kernels.add<TensorTriple>("aten::masked_fill", "Tensor",
                              &maskedFillTensorMeta);
    kernels.add<TensorTriple>("aten::where", "self", &whereMeta);
    kernels.add<UnaryOut>("aten::abs", "out", &absOutMeta);
    kernels.add<MaskedFillInPlaceScalar>("aten::masked_fill_", "Scalar",
                                         &maskedFillInPlaceScalarMeta);
    kernels.add<MaskedFillInPlaceTensor>("aten::masked_fill_", "Tensor",
                                         &maskedFillInPlaceTensorMeta);
    kernels.add<Unary>("aten::isnan", "", &isnanMeta);
    kernels.add<UnaryOut>("aten::logical_not", "out", &logicalNotOutMeta);
    kernels.add<Hardtanh>("aten::hardtanh", "", &hardtanhMeta);
    kernels.add<HardtanhBackward>("aten::hardtanh_backward", "",
                                  &hardtanhBackwardMeta);
    kernels.add<WithDims>("aten::flip", "", &flipMeta);
    kernels.add<Roll>("aten::roll", "", &rollMeta);
    for (const char* name :
         {"aten::logical_and", "aten::logical_or", "aten::logical_xor"}) {
      kernels.add<BinaryOut>(name, "out", &logicalBinaryOutMeta);
    }
    kernels.add<Unary>("aten::hardswish", "", &hardswishMeta);
    kernels.add<Binary>("aten::floor_divide", "", &floorDivideMeta);
    kernels.add<BinaryInPlace>("aten::floor_divide_", "Tensor",
                               &floorDivideInPlaceMeta);
    kernels.add<BinaryOut>("aten::floor_divide", "out", &floorDivideOutMeta);
    kernels.add<NanToNumOut>("aten::nan_to_num", "out", &nanToNumOutMeta);
    kernels.add<Binary>("aten::dot", "", &dotMeta);
    kernels.add<Binary>("aten::vdot", "", &dotMeta);
    kernels.add<Variance>("aten::std", "correction", &stdVarMeta);
    kernels.add<Variance>("aten::var", "correction", &stdVarMeta);
    kernels.add<VarianceMean>("aten::std_mean", "correction", &stdVarMeanMeta);
    kernels.add<VarianceMean>("aten::var_mean", "correction", &stdVarMeanMeta);
    kernels.add<WithDims>("aten::count_nonzero", "dim_IntList",
                          &countNonzeroMeta);
    addLayerMetaKernels(kernels);
    addActivationAndLossMetaKernels(kernels);
    addLookupMetaKernels(kernels);
    addSamplingMetaKernels(kernels);
    addForeachMetaKernels(kernels);
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
