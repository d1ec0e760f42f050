#include "op_schema.h"

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace mydev {
namespace {

c10::TypeKind kindWithoutOptional(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::OptionalType) {
    return type->castRaw<c10::OptionalType>()->getElementType()->kind();
  }
  return type->kind();
}

bool outSchemaExtends(const c10::FunctionSchema& functional,
                      const c10::FunctionSchema& out) {
  const size_t n_args = functional.arguments().size();
  if (out.arguments().size() != n_args + functional.returns().size()) {
    return false;
  }
  for (size_t i = 0; i < n_args; ++i) {
    if (out.arguments()[i].name() != functional.arguments()[i].name() ||
        *out.arguments()[i].real_type() !=
            *functional.arguments()[i].real_type()) {
      return false;
    }
  }
  for (size_t i = n_args; i < out.arguments().size(); ++i) {
    if (!out.arguments()[i].is_out()) {
      return false;
    }
  }
  return true;
}

// Out= overloads that are not the functional op writing into `out`: they
// use `out` as scratch of another shape first (resizing it, which host views
// of device memory can't do, or warning about it), or assume it is
// contiguous. Their functional overload runs instead, then one copy.
bool outVariantMisbehaves(const c10::OperatorName& name) {
  static const std::unordered_set<std::string> misbehaving = {
      "aten::mse_loss",     "aten::binary_cross_entropy",
      "aten::huber_loss",   "aten::smooth_l1_loss",
      "aten::max_unpool2d", "aten::max_unpool3d"};
  return misbehaving.count(name.name) != 0;
}

// The overload names of every operator, by operator name: the dispatcher
// finds an op by its full name only. Built once (ATen registers all its
// operators when libtorch loads, before any lookup here).
const std::unordered_map<std::string, std::vector<std::string>>&
overloadsByName() {
  static const auto* const index = [] {
    auto* built =
        new std::unordered_map<std::string, std::vector<std::string>>();
    for (const c10::OperatorName& name :
         c10::Dispatcher::singleton().getAllOpNames()) {
      (*built)[name.name].push_back(name.overload_name);
    }
    return built;
  }();
  return *index;
}

// A structured op's functional form runs its out= kernel (ATen's generic
// CompositeExplicitAutogradNonFunctional kernel calls it), whatever that
// overload's name: sum.dim_IntList writes through sum.IntList_out,
// threshold_backward through threshold_backward.grad_input. The naming
// conventions miss those; the schema finds them.
bool isStructuredFunctional(const c10::OperatorHandle& op) {
  return op.hasKernelForDispatchKey(
      c10::DispatchKey::CompositeExplicitAutogradNonFunctional);
}

std::optional<c10::OperatorHandle> outOverloadBySchema(
    const c10::OperatorHandle& op) {
  const c10::OperatorName& name = op.operator_name();
  const auto overloads = overloadsByName().find(name.name);
  if (overloads == overloadsByName().end()) {
    return std::nullopt;
  }
  for (const std::string& overload : overloads->second) {
    if (overload == name.overload_name) {
      continue;
    }
    auto candidate =
        c10::Dispatcher::singleton().findSchema({name.name, overload});
    if (candidate.has_value() &&
        outSchemaExtends(op.schema(), candidate->schema())) {
      return candidate;
    }
  }
  return std::nullopt;
}

std::optional<c10::OperatorHandle> findOutVariant(
    const c10::OperatorHandle& op) {
  const c10::OperatorName& name = op.operator_name();
  if (outVariantMisbehaves(name)) {
    return std::nullopt;
  }
  for (const std::string& overload :
       {name.overload_name.empty() ? std::string("out")
                                   : name.overload_name + "_out",
        std::string("out")}) {
    auto candidate =
        c10::Dispatcher::singleton().findSchema({name.name, overload});
    if (candidate.has_value() &&
        outSchemaExtends(op.schema(), candidate->schema())) {
      return candidate;
    }
  }
  if (isStructuredFunctional(op)) {
    return outOverloadBySchema(op);
  }
  return std::nullopt;
}

}  // namespace

bool outputsShapedByTheData(const c10::OperatorHandle& op) {
  const std::string& name = op.operator_name().name;
  if (name == "aten::_embedding_bag" ||
      name == "aten::_embedding_bag_forward_only") {
    return true;
  }
  // torch tags the ops whose result's shape can depend on the data (their
  // Meta kernels raise, after importing sympy). Two of them know the shape
  // from their arguments in the common case, which their Meta kernels use:
  // indexing by integer tensors and repeat_interleave given output_size.
  return op.hasTag(at::Tag::dynamic_output_shape) && name != "aten::index" &&
         name != "aten::repeat_interleave";
}

bool isForeachOp(const c10::OperatorName& name) {
  return std::string_view(name.name).substr(0, kForeachOpPrefix.size()) ==
         kForeachOpPrefix;
}

ArgumentKind argumentKind(const c10::Argument& argument) {
  switch (kindWithoutOptional(argument.real_type())) {
    case c10::TypeKind::DeviceObjType: return ArgumentKind::Device;
    case c10::TypeKind::GeneratorType: return ArgumentKind::Generator;
    default: return ArgumentKind::Other;
  }
}

bool takesGenerator(const c10::FunctionSchema& schema) {
  for (const c10::Argument& argument : schema.arguments()) {
    if (argumentKind(argument) == ArgumentKind::Generator) {
      return true;
    }
  }
  return false;
}

bool returnsOnlyTensors(const c10::FunctionSchema& schema) {
  for (const c10::Argument& ret : schema.returns()) {
    const c10::TypePtr& type = ret.real_type();
    const bool tensor_like =
        type->kind() == c10::TypeKind::TensorType ||
        (type->kind() == c10::TypeKind::ListType &&
         type->containedType(0)->kind() == c10::TypeKind::TensorType);
    if (!tensor_like) {
      return false;
    }
  }
  return true;
}

std::optional<size_t> aliasedArgument(const c10::FunctionSchema& schema,
                                      size_t return_index) {
  const c10::AliasInfo* ret_alias = schema.returns()[return_index].alias_info();
  if (ret_alias == nullptr) {
    return std::nullopt;
  }
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    const c10::AliasInfo* arg_alias = schema.arguments()[i].alias_info();
    if (arg_alias != nullptr &&
        arg_alias->beforeSets() == ret_alias->beforeSets()) {
      return i;
    }
  }
  return std::nullopt;
}

std::optional<c10::OperatorHandle> outVariantOf(const c10::OperatorHandle& op) {
  return operatorFact<&findOutVariant>(op);
}

}  // namespace mydev
