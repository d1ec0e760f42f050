#include "cpu_kernel_checks.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Gelu.h>
#include <ATen/native/ReduceOpsUtils.h>

#include <string_view>

#include "scalar_conversion_checks.h"

namespace mydev {
namespace {

using at::Tensor;

// An out= argument the CPU kernel writes only if it shares no memory with
// its inputs (nor with itself, through a zero stride).
void checkOutOverlapsNothing(const Tensor& out, c10::ArrayRef<Tensor> inputs) {
  at::assert_no_internal_overlap(out);
  for (const Tensor& input : inputs) {
    at::assert_no_overlap(out, input);
  }
}

// index_select(self, dim, index, *, out)
void checkIndexSelectOut(c10::ArrayRef<c10::IValue> args) {
  const Tensor& self = args[0].toTensor();
  const Tensor& index = args[2].toTensor();
  const Tensor& out = args[3].toTensor();
  if (index.dim() <= 1 && !(self.dim() == 0 && index.numel() != 1) &&
      (index.scalar_type() == at::kLong || index.scalar_type() == at::kInt) &&
      self.scalar_type() == out.scalar_type()) {
    checkOutOverlapsNothing(out, {self, index});
  }
}

// masked_select(self, mask, *, out)
void checkMaskedSelectOut(c10::ArrayRef<c10::IValue> args) {
  const Tensor& self = args[0].toTensor();
  const Tensor& mask = args[1].toTensor();
  const Tensor& out = args[2].toTensor();
  if (mask.scalar_type() == at::kBool &&
      self.scalar_type() == out.scalar_type()) {
    checkOutOverlapsNothing(out, {self, mask});
  }
}

// take(self, index, *, out)
void checkTakeOut(c10::ArrayRef<c10::IValue> args) {
  const Tensor& self = args[0].toTensor();
  const Tensor& index = args[1].toTensor();
  const Tensor& out = args[2].toTensor();
  if (index.scalar_type() == at::kLong &&
      self.scalar_type() == out.scalar_type() &&
      self.device() == out.device() && self.device() == index.device() &&
      !(self.numel() == 0 && index.numel() != 0)) {
    checkOutOverlapsNothing(out, {index, self});
  }
}

// cat(tensors, dim, *, out): legacy empty inputs (1-D, no elements) are
// skipped, and with nothing else there is nothing to check.
void checkCatOut(c10::ArrayRef<c10::IValue> args) {
  const c10::List<Tensor> tensors = args[0].toTensorList();
  const Tensor& out = args[2].toTensor();
  bool some_counted = false;
  for (const Tensor& t : tensors) {
    some_counted = some_counted || !(t.dim() == 1 && t.numel() == 0);
  }
  if (some_counted) {
    checkOutOverlapsNothing(out, tensors.vec());
  }
}

// complex(real, imag[, out]): both parts of one floating dtype, the result
// of its complex dtype.
void checkComplex(c10::ArrayRef<c10::IValue> args) {
  const Tensor& real = args[0].toTensor();
  const Tensor& imag = args[1].toTensor();
  const auto floating = [](at::ScalarType type) {
    return type == at::kFloat || type == at::kDouble || type == at::kHalf;
  };
  TORCH_CHECK(floating(real.scalar_type()) && floating(imag.scalar_type()),
              "Expected both inputs to be Half, Float or Double tensors but "
              "got ",
              real.scalar_type(), " and ", imag.scalar_type());
  TORCH_CHECK(real.scalar_type() == imag.scalar_type(),
              "Expected object of scalar type ", real.scalar_type(),
              " but got scalar type ", imag.scalar_type(),
              " for second argument");
  if (args.size() > 2) {
    const at::ScalarType wanted = c10::toComplexType(real.scalar_type());
    const Tensor& out = args[2].toTensor();
    TORCH_CHECK(out.scalar_type() == wanted, "Expected object of scalar type ",
                wanted, " but got scalar type ", out.scalar_type(),
                " for argument 'out'");
  }
}

// kthvalue(self, k, dim, keepdim[, values, indices])
void checkKthvalue(c10::ArrayRef<c10::IValue> args) {
  const Tensor& self = args[0].toTensor();
  const int64_t k = args[1].toInt();
  const int64_t dim =
      at::maybe_wrap_dim(args[2].toInt(), self.dim(), /*wrap_scalar=*/true);
  at::native::zero_numel_check_dims(self, dim, "kthvalue()");
  const int64_t slice = self.dim() == 0 ? 1 : self.size(dim);
  TORCH_CHECK(k >= 1 && k <= slice,
              "kthvalue(): selected number k out of range for dimension ", dim);
  if (args.size() > 4) {
    at::assert_no_overlap(self, args[4].toTensor());  // the values out=
  }
}

// index_put(self, indices, values, accumulate) in every form: values of
// self's dtype (checked after the indices and shapes, by the Meta kernel).
// Not where the CPU writes a one-element value through a mask with
// masked_fill instead, which converts it.
void checkIndexPutValues(c10::ArrayRef<c10::IValue> args) {
  const Tensor& self = args[0].toTensor();
  const Tensor& values = args[2].toTensor();
  if (values.scalar_type() == self.scalar_type()) {
    return;
  }
  if (!args[3].toBool() && values.numel() == 1) {
    for (const std::optional<Tensor>& index : args[1].toOptionalTensorList()) {
      if (index.has_value() && index->defined() &&
          (index->scalar_type() == at::kBool ||
           index->scalar_type() == at::kByte)) {
        return;  // maybe masked_fill's route: left to the kernel
      }
    }
  }
  TORCH_CHECK(false,
              "Index put requires the source and destination dtypes match, "
              "got ",
              self.scalar_type(), " for the destination and ",
              values.scalar_type(), " for the source.");
}

// masked_scatter(self, mask, source) and its in-place form.
void checkMaskedScatter(c10::ArrayRef<c10::IValue> args) {
  const Tensor& self = args[0].toTensor();
  const Tensor& mask = args[1].toTensor();
  const Tensor& source = args[2].toTensor();
  if (self.scalar_type() == source.scalar_type()) {
    TORCH_CHECK(mask.scalar_type() == at::kBool,
                "masked_scatter_ only supports boolean masks, but got mask "
                "with dtype ",
                mask.scalar_type());
  }
}

// gelu(self, approximate) and gelu_backward(grad, self, approximate).
template <size_t kApproximate>
void checkGeluApproximation(c10::ArrayRef<c10::IValue> args) {
  (void)at::native::get_gelutype_enum(args[kApproximate].toStringView());
}

// multinomial(self, num_samples, replacement, generator[, out]): the CPU
// kernel's checks in its order, from the first its Meta kernel leaves out.
void checkMultinomial(c10::ArrayRef<c10::IValue> args) {
  const Tensor& self = args[0].toTensor();
  const int64_t samples = args[1].toInt();
  const bool replacement = args[2].toBool();
  if (self.dim() < 1 || self.dim() > 2 ||
      !at::isFloatingType(self.scalar_type())) {
    return;
  }
  if (args.size() > 4) {
    const Tensor& out = args[4].toTensor();
    TORCH_CHECK(
        out.scalar_type() == at::kLong,
        "multinomial expects Long tensor out, got: ", out.scalar_type());
  }
  if (samples > 0 && (replacement || samples <= self.size(-1))) {
    TORCH_CHECK(self.size(-1) <= (int64_t{1} << 24),
                "number of categories cannot exceed 2^24");
  }
}

}  // namespace

CpuKernelCheck cpuKernelCheckFor(const c10::OperatorName& op) {
  const std::string_view name = op.name;
  const std::string_view overload = op.overload_name;
  if (name == "aten::index_select" && overload == "out") {
    return &checkIndexSelectOut;
  }
  if (name == "aten::masked_select" && overload == "out") {
    return &checkMaskedSelectOut;
  }
  if (name == "aten::cat" && overload == "out") {
    return &checkCatOut;
  }
  if (name == "aten::complex") {
    return &checkComplex;
  }
  if (name == "aten::take" && overload == "out") {
    return &checkTakeOut;
  }
  if (name == "aten::kthvalue" && (overload.empty() || overload == "values")) {
    return &checkKthvalue;
  }
  if (name == "aten::masked_scatter" || name == "aten::masked_scatter_") {
    return &checkMaskedScatter;
  }
  if (name == "aten::gelu" || name == "aten::gelu_") {
    return &checkGeluApproximation<1>;
  }
  if (name == "aten::gelu_backward") {
    return &checkGeluApproximation<2>;
  }
  if (name == "aten::multinomial") {
    return &checkMultinomial;
  }
  return nullptr;
}

CpuKernelCheck cpuKernelCheckAfterMetaFor(const c10::OperatorName& op) {
  const std::string_view name = op.name;
  if (name == "aten::index_put" || name == "aten::index_put_" ||
      name == "aten::_index_put_impl_") {
    return &checkIndexPutValues;
  }
  return scalarConversionCheckFor(op);
}

}  // namespace mydev
