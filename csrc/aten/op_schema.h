// Reading an operator's schema for the generic device-kernel path: which
// arguments are tensors, devices or generators, which returns alias which
// arguments, and the out= overload of a functional op.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/function_schema.h>

#include <optional>
#include <string_view>
#include <type_traits>
#include <unordered_map>

namespace mydev {

// What `compute(op)` says about an operator, computed once per thread:
// what an operator's name and schema say never changes while it is
// registered.
//  - The schema's address is the key, so only torch's own operators
//    (aten::, prims::), never deregistered, may be asked about: a custom
//    op's schema could be freed and its address reused by another op.
//  - Per thread: every op on the device-kernel path asks, and a table
//    shared between threads would need a lock on that path.
template <auto compute>
const auto& operatorFact(const c10::OperatorHandle& op) {
  using Fact = std::decay_t<decltype(compute(op))>;
  thread_local std::unordered_map<const c10::FunctionSchema*, Fact> facts;
  const c10::FunctionSchema* const key = &op.schema();
  auto found = facts.find(key);
  if (found == facts.end()) {
    found = facts.emplace(key, compute(op)).first;
  }
  return found->second;
}

// aten::_foreach_*: the ops that apply a per-tensor op (aten::<the rest of
// the name>) at each position of their tensor lists.
constexpr std::string_view kForeachOpPrefix = "aten::_foreach_";
bool isForeachOp(const c10::OperatorName& name);

enum class ArgumentKind { Device, Generator, Other };
ArgumentKind argumentKind(const c10::Argument& argument);

// Ops whose Meta kernel can't predict their outputs' shapes (they depend on
// the data or on the mode in ways the Meta kernel doesn't model), beyond the
// ones that have no Meta kernel at all.
bool outputsShapedByTheData(const c10::OperatorHandle& op);

// True when the op takes a Generator (is a random op).
bool takesGenerator(const c10::FunctionSchema& schema);

// True when every return is a Tensor or a list of Tensors.
bool returnsOnlyTensors(const c10::FunctionSchema& schema);

// Index of the argument a return aliases (same alias set), if any.
std::optional<size_t> aliasedArgument(const c10::FunctionSchema& schema,
                                      size_t return_index);

// The out= overload of a functional op (aten::add.Tensor -> aten::add.out),
// when its schema is the functional one plus one out argument per return.
// A structured op's is found by schema whatever its name
// (aten::sum.dim_IntList -> aten::sum.IntList_out).
std::optional<c10::OperatorHandle> outVariantOf(const c10::OperatorHandle& op);

}  // namespace mydev
