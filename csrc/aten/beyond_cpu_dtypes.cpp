#include "beyond_cpu_dtypes.h"

#include <ATen/ops/bincount.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros_like.h>

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ivalue_tensors.h"
#include "op_schema.h"

namespace mydev {
namespace {

using torch::jit::Stack;
using DtypeSet = std::unordered_set<at::ScalarType>;

constexpr at::ScalarType kComplex32 = at::ScalarType::ComplexHalf;

// The dtype a widened kernel computes in: the narrowest wider one every CPU
// kernel of the table supports. Widening bool to uint8 keeps its values.
at::ScalarType widerType(at::ScalarType type) {
  switch (type) {
    case at::kHalf:
    case at::kBFloat16: return at::kFloat;
    case kComplex32: return at::kComplexFloat;
    case at::kBool: return at::kByte;
    default: return type;
  }
}

// What a result computed in the wider dtype is stored as: the op's own
// dtype (and a complex or real result of a real or complex input, say
// fft of float16 or angle of complex32, in its counterpart of that width).
at::ScalarType narrowedResultType(at::ScalarType result,
                                  const DtypeSet& widened) {
  for (const at::ScalarType narrow : widened) {
    const bool half_width = narrow == at::kHalf || narrow == kComplex32;
    if (result == at::kFloat && narrow != at::kBool) {
      return half_width ? at::kHalf : narrow;
    }
    if (result == at::kComplexFloat && half_width) {
      return kComplex32;
    }
    if (result == at::kByte && narrow == at::kBool) {
      return at::kBool;
    }
  }
  return result;
}

// ops (by name, in-place variants included) computed in a wider dtype for
// the dtypes listed: cuda has kernels for them, the CPU none.
const std::unordered_map<std::string, DtypeSet>& widenedOps() {
  static const DtypeSet c32 = {kComplex32};
  static const DtypeSet reduced = {at::kHalf, at::kBFloat16};
  static const std::unordered_map<std::string, DtypeSet> ops = {
      // complex32 math
      {"aten::acos", c32},
      {"aten::acosh", c32},
      {"aten::asin", c32},
      {"aten::asinh", c32},
      {"aten::atan", c32},
      {"aten::atanh", c32},
      {"aten::cos", c32},
      {"aten::cosh", c32},
      {"aten::sin", c32},
      {"aten::sinh", c32},
      {"aten::tan", c32},
      {"aten::tanh", c32},
      {"aten::exp", c32},
      {"aten::log", c32},
      {"aten::sqrt", c32},
      {"aten::rsqrt", c32},
      {"aten::sigmoid", c32},
      {"aten::angle", c32},
      {"aten::div", c32},
      {"aten::logaddexp", c32},
      {"aten::pow", c32},
      {"aten::lerp", c32},
      {"aten::diag", c32},
      {"aten::sum", c32},
      {"aten::prod", c32},
      {"aten::nansum", c32},
      {"aten::trace", {kComplex32, at::kBool}},
      {"aten::convolution", c32},
      // half / bfloat16 pooling, resampling, losses, special functions
      {"aten::avg_pool3d", reduced},
      {"aten::avg_pool3d_backward", reduced},
      {"aten::_upsample_bilinear2d_aa", reduced},
      {"aten::_upsample_bilinear2d_aa_backward", reduced},
      {"aten::multi_margin_loss", reduced},
      {"aten::multi_margin_loss_backward", reduced},
      {"aten::multilabel_margin_loss_forward", reduced},
      {"aten::multilabel_margin_loss_backward", reduced},
      {"aten::rrelu_with_noise", {at::kHalf}},
      {"aten::round", {at::kHalf}},
      {"aten::polygamma", {at::kHalf}},
      // bool
      {"aten::abs", {at::kBool}},
  };
  return ops;
}

// --- kernels of our own, where widening would change the result --------

const at::Tensor* outArgument(const c10::FunctionSchema& schema,
                              const Stack& args) {
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    if (schema.arguments()[i].is_out()) return &args[i].toTensor();
  }
  return nullptr;
}

// Pops the op's arguments and pushes `result` (written into the out=
// argument, if the overload has one).
void returnResult(const c10::FunctionSchema& schema, Stack* stack,
                  const at::Tensor& result) {
  const size_t n_args = schema.arguments().size();
  const Stack args(stack->end() - n_args, stack->end());
  torch::jit::drop(*stack, n_args);
  const at::Tensor* out = outArgument(schema, args);
  if (out == nullptr) {
    stack->push_back(result);
    return;
  }
  if (out->sizes() != result.sizes()) out->resize_(result.sizes());
  out->copy_(result);
  stack->push_back(*out);
}

// histc of integers as cuda computes it: the range is cast to the input's
// integer type, and a value's bin is (value - min) * bins / (max - min) in
// integer arithmetic (a float histogram of the same values bins at float
// bounds instead).
void histcOfIntegers(const c10::OperatorHandle& op, Stack* stack) {
  const size_t base = stack->size() - op.schema().arguments().size();
  const at::Tensor self = (*stack)[base].toTensor();
  const int64_t bins = (*stack)[base + 1].toInt();
  int64_t low = (*stack)[base + 2].toScalar().to<int64_t>();
  int64_t high = (*stack)[base + 3].toScalar().to<int64_t>();
  TORCH_CHECK(bins > 0, "bins must be > 0");
  if (low == high && self.numel() > 0) {
    low = self.min().item<int64_t>();
    high = self.max().item<int64_t>();
  }
  if (low == high) {
    low -= 1;
    high += 1;
  }
  TORCH_CHECK(low < high, "max must be larger than min");
  at::Tensor values = self.flatten().to(at::kLong);
  values = values.masked_select(values.ge(low).logical_and_(values.le(high)));
  const at::Tensor bin =
      values.sub(low).mul_(bins).div_(high - low, "floor").clamp_max_(bins - 1);
  returnResult(op.schema(), stack,
               at::bincount(bin, {}, bins).to(self.scalar_type()));
}

// nansum of complex numbers as cuda computes it: a value with a NaN part
// counts as zero (the CPU kernel has no complex dtypes).
void nansumOfComplex(const c10::OperatorHandle& op, Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  const size_t base = stack->size() - schema.arguments().size();
  const at::Tensor self = (*stack)[base].toTensor();
  const c10::IValue& dim_arg = (*stack)[base + 1];
  const std::vector<int64_t> dim_values =
      dim_arg.isNone() ? std::vector<int64_t>() : dim_arg.toIntVector();
  const at::OptionalIntArrayRef dims =
      dim_arg.isNone() ? at::OptionalIntArrayRef()
                       : at::OptionalIntArrayRef(dim_values);
  const bool keepdim = (*stack)[base + 2].toBool();
  const std::optional<at::ScalarType> dtype =
      (*stack)[base + 3].toOptional<at::ScalarType>();
  const at::Tensor zeroed = at::where(self.isnan(), at::zeros_like(self), self);
  returnResult(schema, stack, zeroed.sum(dims, keepdim, dtype));
}

struct OwnKernel {
  bool (*applies)(at::ScalarType);
  void (*run)(const c10::OperatorHandle&, Stack*);
};

const std::unordered_map<std::string, OwnKernel>& ownKernels() {
  static const std::unordered_map<std::string, OwnKernel> kernels = {
      {"aten::histc",
       {[](at::ScalarType t) {
          return at::isIntegralType(t, /*includeBool=*/false);
        },
        &histcOfIntegers}},
      {"aten::nansum",
       {[](at::ScalarType t) { return at::isComplexType(t); },
        &nansumOfComplex}},
  };
  return kernels;
}

// --- the widening itself ---------------------------------------------------

// Calls `inner` with the tensors of the dtypes in `widened` converted to
// their wider dtype; writes in-place and out= arguments back in their own
// dtype, and leaves fresh results in the op's own dtypes.
void runWidened(const c10::OperatorHandle& op, Stack* stack,
                const DtypeSet& widened,
                void (*inner)(const c10::OperatorHandle&, Stack*)) {
  const c10::FunctionSchema& schema = op.schema();
  const size_t n_args = schema.arguments().size();
  const size_t base = stack->size() - n_args;
  const std::vector<c10::IValue> originals(stack->begin() + base, stack->end());
  std::vector<std::pair<at::Tensor, at::Tensor>> written;  // (own dtype, wider)
  for (size_t i = 0; i < n_args; ++i) {
    const c10::AliasInfo* alias = schema.arguments()[i].alias_info();
    const bool is_written = alias != nullptr && alias->isWrite();
    (*stack)[base + i] = mapTensors(originals[i], [&](const at::Tensor& t) {
      if (!t.defined() || widened.count(t.scalar_type()) == 0) {
        return t;
      }
      at::Tensor wide = t.to(widerType(t.scalar_type()));
      if (is_written) written.emplace_back(t, wide);
      return wide;
    });
  }
  inner(op, stack);
  for (const auto& [own, wide] : written) {
    if (own.sizes() != wide.sizes()) own.resize_(wide.sizes());
    own.copy_(wide);
  }
  for (size_t r = 0; r < schema.returns().size(); ++r) {
    c10::IValue& result = (*stack)[stack->size() - schema.returns().size() + r];
    const std::optional<size_t> aliased = aliasedArgument(schema, r);
    if (aliased.has_value()) {
      result = originals[*aliased];
      continue;
    }
    result = mapTensors(result, [&](const at::Tensor& t) {
      return t.defined() ? t.to(narrowedResultType(t.scalar_type(), widened))
                         : t;
    });
  }
}

void callCpuKernel(const c10::OperatorHandle& op, Stack* stack) {
  op.callBoxed(stack);
}

std::string baseName(const c10::OperatorName& name) {
  const std::string& full = name.name;
  // In-place variants (aten::exp_) compute what their functional op does.
  return full.size() > 1 && full.back() == '_' ? full.substr(0, full.size() - 1)
                                               : full;
}

// An operator's entries in the two tables (null: not in it).
struct TableEntries {
  const DtypeSet* widened = nullptr;
  const OwnKernel* own = nullptr;
};

TableEntries tableEntriesOf(const c10::OperatorHandle& op) {
  const std::string name = baseName(op.operator_name());
  const auto widened = widenedOps().find(name);
  const auto own = ownKernels().find(name);
  return {widened == widenedOps().end() ? nullptr : &widened->second,
          own == ownKernels().end() ? nullptr : &own->second};
}

}  // namespace

std::optional<HostKernel> kernelBeyondCpuDtypes(
    const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args) {
  // Most ops are in neither table, and every op on the device-kernel path
  // asks: the entries are looked up once per operator.
  const TableEntries& entries = operatorFact<&tableEntriesOf>(op);
  if (entries.widened == nullptr && entries.own == nullptr) {
    return std::nullopt;
  }
  DtypeSet widened;
  std::optional<at::ScalarType> first_type;
  for (const c10::IValue& arg : args) {
    forEachTensor(arg, [&](const at::Tensor& t) {
      if (!first_type.has_value()) first_type = t.scalar_type();
      if (entries.widened != nullptr &&
          entries.widened->count(t.scalar_type())) {
        widened.insert(t.scalar_type());
      }
    });
  }
  if (!first_type.has_value()) {
    return std::nullopt;
  }
  void (*inner)(const c10::OperatorHandle&, Stack*) = &callCpuKernel;
  if (entries.own != nullptr &&
      entries.own->applies(widened.count(*first_type) ? widerType(*first_type)
                                                      : *first_type)) {
    inner = entries.own->run;
  }
  if (widened.empty() && inner == &callCpuKernel) {
    return std::nullopt;
  }
  return HostKernel(
      [widened, inner](const c10::OperatorHandle& op, Stack* stack) {
        runWidened(op, stack, widened, inner);
      });
}

}  // namespace mydev
