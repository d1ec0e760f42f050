// C++ Meta kernels for the _foreach_* ops (optimizers, clip_grad_norm_,
// clip_grad_value_, EMA updates) and GradScaler's unscale. torch has no
// at::meta kernel for them: on the Meta key a _foreach_* op is ATen's
// composite loop over the per-tensor op, whose Meta kernel is Python, and
// the first such call imports sympy or torch._dynamo (0.3-1.3 s on the
// host thread; native_meta_kernels.h). The CPU's _foreach_* kernels are
// that same loop, so each entry here runs the per-tensor op's C++ Meta
// kernel from the table once per position of the lists. A call it does not
// model throws, and the device-kernel path then runs the CPU kernel
// synchronously, which raises the CPU's own error at the call.
#include <ATen/ScalarOps.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "meta_layouts.h"
#include "native_meta_table.h"
#include "op_schema.h"

namespace mydev {
namespace {

using at::Tensor;
using torch::jit::Stack;

// The type an argument of the per-tensor op has where the _foreach_* op
// has `foreach_type`: one element of a list (Tensor[] -> Tensor,
// Scalar[] -> Scalar), anything else as it is.
const c10::Type& elementTypeOf(const c10::Type& foreach_type) {
  if (const auto* list = foreach_type.castRaw<c10::ListType>()) {
    return *list->getElementType();
  }
  return foreach_type;
}

bool isListArgument(const c10::Argument& argument) {
  return argument.type()->kind() == c10::TypeKind::ListType;
}

// Whether `element` is the per-tensor op `foreach` loops over: it takes
// one element of each list argument and the other arguments as they are,
// in the same order (its further arguments all have defaults), and it
// returns one tensor, written in place exactly when `foreach` writes its
// first list in place and returns nothing.
bool loopsOver(const c10::FunctionSchema& foreach,
               const c10::FunctionSchema& element) {
  const auto& foreach_args = foreach.arguments();
  const auto& element_args = element.arguments();
  if (foreach_args.empty() || element_args.size() < foreach_args.size() ||
      element.returns().size() != 1 ||
      *element.returns()[0].type() != *c10::TensorType::get()) {
    return false;
  }
  const bool in_place = foreach.returns().empty();
  if (in_place != element.is_mutable() ||
      (!in_place && (foreach.returns().size() != 1 || foreach.is_mutable()))) {
    return false;
  }
  for (size_t i = 0; i < foreach_args.size(); ++i) {
    // Only the first list is written (out= forms are left to the composite).
    const bool written = foreach_args[i].alias_info() != nullptr &&
                         foreach_args[i].alias_info()->isWrite();
    if ((i > 0 && written) ||
        elementTypeOf(*foreach_args[i].type()) != *element_args[i].type()) {
      return false;
    }
  }
  for (size_t i = foreach_args.size(); i < element_args.size(); ++i) {
    if (!element_args[i].default_value().has_value()) {
      return false;
    }
  }
  return *foreach_args[0].type() == *c10::ListType::ofTensors();
}

// One _foreach_* op's Meta kernel: the per-tensor op's, at each position.
class ForeachMeta final : public c10::OperatorKernel {
 public:
  ForeachMeta(c10::OperatorHandle element_op,
              c10::KernelFunction element_kernel, bool wraps_scalar)
      : element_op_(std::move(element_op)),
        element_kernel_(std::move(element_kernel)),
        wraps_scalar_(wraps_scalar) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                  Stack* stack) {
    const auto& schema_args = op.schema().arguments();
    const size_t n_args = schema_args.size();
    const auto args = torch::jit::last(*stack, n_args);
    const size_t positions = args[0].toListRef().size();
    // The CPU kernels' own checks on the lists (check_foreach_api_
    // restrictions) and on a tensor given for all positions (a scalar).
    TORCH_CHECK(positions > 0, op.operator_name(),
                ": left to the CPU kernel (empty list)");
    for (size_t i = 0; i < n_args; ++i) {
      if (isListArgument(schema_args[i])) {
        TORCH_CHECK(args[i].toListRef().size() == positions, op.operator_name(),
                    ": left to the CPU kernel (lists of different lengths)");
      } else if (args[i].isTensor()) {
        TORCH_CHECK(args[i].toTensor().dim() == 0, op.operator_name(),
                    ": left to the CPU kernel (a tensor that is not 0-dim)");
      }
    }
    const auto& element_args = element_op_.schema().arguments();
    std::vector<Tensor> results;
    results.reserve(positions);
    Stack element_stack;
    element_stack.reserve(element_args.size());
    for (size_t position = 0; position < positions; ++position) {
      for (size_t i = 0; i < n_args; ++i) {
        element_stack.push_back(isListArgument(schema_args[i])
                                    ? args[i].toListRef()[position]
                                    : args[i]);
      }
      if (wraps_scalar_) {
        // A Python number as ATen's binary ops take it: a 0-dim tensor
        // that promotes types weakly.
        element_stack[1] = at::native::wrapped_scalar_tensor(
            element_stack[1].toScalar(), c10::kMeta);
      }
      for (size_t i = n_args; i < element_args.size(); ++i) {
        element_stack.push_back(*element_args[i].default_value());
      }
      element_kernel_.callBoxed(element_op_, keys, &element_stack);
      results.push_back(std::move(element_stack.back()).toTensor());
      element_stack.clear();
    }
    torch::jit::drop(*stack, n_args);
    if (!op.schema().returns().empty()) {
      stack->emplace_back(c10::List<Tensor>(std::move(results)));
    }
  }

 private:
  c10::OperatorHandle element_op_;
  c10::KernelFunction element_kernel_;
  // The per-tensor op is the Tensor overload standing for a Scalar one.
  bool wraps_scalar_;
};

// Every overload of each op, by the op's name.
using OverloadsByName =
    std::unordered_map<std::string, std::vector<c10::OperatorName>>;

// The per-tensor op a _foreach_* op loops over: exactly one overload of
// aten::<name without _foreach_> fits.
std::optional<c10::OperatorHandle> elementOpOf(
    const c10::OperatorHandle& foreach, const OverloadsByName& overloads) {
  const auto element_overloads = overloads.find(
      "aten::" + foreach.operator_name().name.substr(kForeachOpPrefix.size()));
  if (element_overloads == overloads.end()) {
    return std::nullopt;
  }
  std::optional<c10::OperatorHandle> found;
  for (const c10::OperatorName& name : element_overloads->second) {
    const auto candidate = c10::Dispatcher::singleton().findOp(name);
    if (!candidate.has_value() || !candidate->hasSchema() ||
        !loopsOver(foreach.schema(), candidate->schema())) {
      continue;
    }
    if (found.has_value()) {
      return std::nullopt;  // ambiguous: leave it to the composite
    }
    found = candidate;
  }
  return found;
}

// The Meta kernel that stands for `element` at each position: its own from
// the table, or for a binary op's Scalar overload (composite in ATen: the
// Tensor overload with the number wrapped) the Tensor overload's.
std::unique_ptr<ForeachMeta> foreachMetaOver(const c10::OperatorHandle& element,
                                             const NativeMetaTable& table) {
  if (const c10::KernelFunction* kernel = table.find(element.operator_name())) {
    return std::make_unique<ForeachMeta>(element, *kernel, false);
  }
  if (element.operator_name().overload_name != "Scalar") {
    return nullptr;
  }
  const c10::OperatorName tensor_overload(element.operator_name().name,
                                          "Tensor");
  const auto tensor_op = c10::Dispatcher::singleton().findOp(tensor_overload);
  const c10::KernelFunction* kernel = table.find(tensor_overload);
  if (!tensor_op.has_value() || kernel == nullptr ||
      tensor_op->schema().arguments().size() !=
          element.schema().arguments().size()) {
    return nullptr;
  }
  return std::make_unique<ForeachMeta>(*tensor_op, *kernel, true);
}

// GradScaler.unscale_'s kernel checks its two one-element float tensors
// and that every gradient is floating point; it writes nothing it returns.
void ampNonFiniteCheckAndUnscaleMeta(at::TensorList scaled_grads,
                                     Tensor& found_inf,
                                     const Tensor& inv_scale) {
  TORCH_CHECK(found_inf.numel() == 1 && found_inf.scalar_type() == at::kFloat &&
                  inv_scale.numel() == 1 &&
                  inv_scale.scalar_type() == at::kFloat,
              "_amp_foreach_non_finite_check_and_unscale_: left to the CPU "
              "kernel");
  for (const Tensor& grad : scaled_grads) {
    checkFloating(grad, "_amp_foreach_non_finite_check_and_unscale_");
  }
}

}  // namespace

void addForeachMetaKernels(NativeMetaTable& table) {
  const std::vector<c10::OperatorName> all_ops =
      c10::Dispatcher::singleton().getAllOpNames();
  OverloadsByName overloads;
  for (const c10::OperatorName& name : all_ops) {
    overloads[name.name].push_back(name);
  }
  for (const c10::OperatorName& name : all_ops) {
    if (!isForeachOp(name)) {
      continue;
    }
    const auto foreach = c10::Dispatcher::singleton().findOp(name);
    if (!foreach.has_value() || !foreach->hasSchema()) {
      continue;
    }
    const auto element = elementOpOf(*foreach, overloads);
    if (!element.has_value()) {
      continue;
    }
    if (auto kernel = foreachMetaOver(*element, table)) {
      table.add(name,
                c10::KernelFunction::makeFromBoxedFunctor(std::move(kernel)));
    }
  }
  table.add<void(at::TensorList, Tensor&, const Tensor&)>(
      "aten::_amp_foreach_non_finite_check_and_unscale_", "",
      &ampNonFiniteCheckAndUnscaleMeta);
}

}  // namespace mydev
