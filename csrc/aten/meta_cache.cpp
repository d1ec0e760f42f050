#include "meta_cache.h"

#include <ATen/core/stack.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/DefaultDtype.h>

#include <cstring>
#include <optional>
#include <unordered_map>

#include "cpu_output_contract.h"
#include "ivalue_tensors.h"
#include "native_meta_kernels.h"
#include "op_schema.h"

namespace mydev {
namespace {

// Bounded so that a program sweeping through shapes can't grow it forever;
// clearing it all at once is fine, it refills from the hot calls.
constexpr size_t kMaxEntries = 1 << 14;

using Key = std::vector<int64_t>;

struct KeyHash {
  size_t operator()(const Key& key) const {
    uint64_t hash = 0xcbf29ce484222325ULL;
    for (const int64_t word : key) {
      hash = (hash ^ static_cast<uint64_t>(word)) * 0x100000001b3ULL;
    }
    return static_cast<size_t>(hash);
  }
};

enum Tag : int64_t {
  kNone = 1,
  kTensor,
  kUndefinedTensor,
  kList,
  kInt,
  kDouble,
  kBool,
  kComplex,
  kIntList,
  kDoubleList,
  kBoolList,
  kString,
  kOpaque
};

int64_t bitsOf(double value) {
  int64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

void appendTensor(Key& key, const at::Tensor& t) {
  if (!t.defined()) {
    key.push_back(kUndefinedTensor);
    return;
  }
  key.push_back(kTensor);
  key.push_back(static_cast<int64_t>(t.scalar_type()));
  key.push_back(static_cast<int64_t>(t.device().type()));
  // A wrapped number (a Python scalar) promotes differently from a 0-dim
  // tensor.
  key.push_back((t.is_conj() ? 1 : 0) | (t.is_neg() ? 2 : 0) |
                (t.unsafeGetTensorImpl()->is_wrapped_number() ? 4 : 0));
  key.push_back(t.dim());
  for (const int64_t size : t.sizes()) key.push_back(size);
  for (const int64_t stride : t.strides()) key.push_back(stride);
}

// Scalar (and Scalar[]) arguments shape outputs through their kind only
// (type promotion: bool < int < float < complex), except where they are the
// bounds of a range. Keying on values would miss the cache whenever a value
// changes, e.g. an optimizer's bias corrections every step.
bool isScalarArgument(const c10::Argument& argument) {
  c10::TypePtr type = argument.real_type();
  if (type->kind() == c10::TypeKind::OptionalType) {
    type = type->castRaw<c10::OptionalType>()->getElementType();
  }
  if (type->kind() == c10::TypeKind::ListType) {
    type = type->containedType(0);
  }
  return type->kind() == c10::TypeKind::NumberType;
}

bool scalarValuesShapeOutputs(const c10::OperatorName& name) {
  return name.name == "aten::arange" || name.name == "aten::range";
}

int64_t scalarKind(const c10::IValue& value) {
  if (value.isBool()) return kBool;
  if (value.isInt()) return kInt;
  if (value.isDouble()) return kDouble;
  if (value.isComplexDouble()) return kComplex;
  return kOpaque;
}

// How an argument's value enters the key.
enum class KeyedAs : uint8_t {
  kPresence,    // a device or generator: replaced for the Meta kernel
  kScalarKind,  // a scalar that shapes outputs through its kind only
  kValue,
};

// How each argument of an op enters the key: fixed for the op, so read
// from its schema once (operatorFact), not from the argument types at
// every call (about a third of a cache hit's time, by perf).
std::vector<KeyedAs> keyingOf(const c10::OperatorHandle& op) {
  const bool scalar_values_matter =
      scalarValuesShapeOutputs(op.operator_name());
  std::vector<KeyedAs> keying;
  for (const c10::Argument& argument : op.schema().arguments()) {
    if (argumentKind(argument) != ArgumentKind::Other) {
      keying.push_back(KeyedAs::kPresence);
    } else if (!scalar_values_matter && isScalarArgument(argument)) {
      keying.push_back(KeyedAs::kScalarKind);
    } else {
      keying.push_back(KeyedAs::kValue);
    }
  }
  return keying;
}

// Appends what the Meta kernel's result can depend on; false if the value
// is of a kind we don't know how to key (then nothing is cached).
bool appendValue(Key& key, KeyedAs how, const c10::IValue& value) {
  if (how == KeyedAs::kPresence) {
    key.push_back(value.isNone() ? kNone : kOpaque);
    return true;
  }
  if (how == KeyedAs::kScalarKind && !value.isList()) {
    key.push_back(value.isNone() ? kNone : scalarKind(value));
    return true;
  }
  if (value.isNone()) {
    key.push_back(kNone);
  } else if (value.isTensor()) {
    appendTensor(key, value.toTensor());
  } else if (value.isTensorList()) {
    key.push_back(kList);
    key.push_back(static_cast<int64_t>(value.toTensorList().size()));
    for (const at::Tensor& t : value.toTensorList()) appendTensor(key, t);
  } else if (value.isOptionalTensorList()) {
    key.push_back(kList);
    const auto list = value.toOptionalTensorList();
    key.push_back(static_cast<int64_t>(list.size()));
    for (const std::optional<at::Tensor>& t : list) {
      appendTensor(key, t.has_value() ? *t : at::Tensor());
    }
  } else if (value.isInt()) {
    key.push_back(kInt);
    key.push_back(value.toInt());
  } else if (value.isDouble()) {
    key.push_back(kDouble);
    key.push_back(bitsOf(value.toDouble()));
  } else if (value.isBool()) {
    key.push_back(kBool);
    key.push_back(value.toBool() ? 1 : 0);
  } else if (value.isComplexDouble()) {
    const c10::complex<double> z = value.toComplexDouble();
    key.push_back(kComplex);
    key.push_back(bitsOf(z.real()));
    key.push_back(bitsOf(z.imag()));
  } else if (value.isIntList()) {
    key.push_back(kIntList);
    const auto list = value.toIntList();
    key.push_back(static_cast<int64_t>(list.size()));
    for (const int64_t element : list) key.push_back(element);
  } else if (value.isDoubleList()) {
    key.push_back(kDoubleList);
    const auto list = value.toDoubleList();
    key.push_back(static_cast<int64_t>(list.size()));
    for (const double element : list) key.push_back(bitsOf(element));
  } else if (value.isBoolList()) {
    key.push_back(kBoolList);
    const auto list = value.toBoolList();
    key.push_back(static_cast<int64_t>(list.size()));
    for (const bool element : list) key.push_back(element ? 1 : 0);
  } else if (value.isString()) {
    key.push_back(kString);
    key.push_back(static_cast<int64_t>(
        std::hash<std::string_view>()(value.toStringView())));
  } else if (value.isList()) {
    // Scalar[] and other generic lists (the foreach ops' scalar lists).
    const c10::List<c10::IValue> list = value.toList();
    key.push_back(kList);
    key.push_back(static_cast<int64_t>(list.size()));
    for (const c10::IValue& element : list) {
      if (!appendValue(key, how, element)) {
        return false;
      }
    }
  } else {
    return false;
  }
  return true;
}

// Fills `key` (cleared first); false if an argument can't be keyed.
bool keyFor(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args,
            Key& key) {
  const std::vector<KeyedAs>& keying = operatorFact<&keyingOf>(op);
  key.clear();
  key.push_back(reinterpret_cast<int64_t>(&op.schema()));
  // Factory functions without a dtype use the default dtype.
  key.push_back(static_cast<int64_t>(
      c10::typeMetaToScalarType(c10::get_default_dtype())));
  for (size_t i = 0; i < args.size(); ++i) {
    if (!appendValue(key, keying[i], args[i])) {
      return false;
    }
  }
  return true;
}

// The argument as the Meta kernel sees it: metadata-only tensors (0-dim CPU
// scalars too: type promotion treats a 0-dim tensor the same on any device,
// and some meta kernels refuse to mix devices), the meta device and no
// generator.
c10::IValue metaArgument(const c10::Argument& schema_arg,
                         const c10::IValue& value) {
  switch (argumentKind(schema_arg)) {
    case ArgumentKind::Device:
      return value.isNone() ? value : c10::IValue(c10::Device(c10::kMeta));
    case ArgumentKind::Generator: return c10::IValue();
    case ArgumentKind::Other: break;
  }
  return mapTensors(value, [](const at::Tensor& t) {
    if (!t.defined()) {
      return t;
    }
    at::Tensor meta = at::empty_strided(t.sizes(), t.strides(),
                                        t.options().device(c10::kMeta));
    meta.unsafeGetTensorImpl()->_set_conj(t.is_conj());
    meta.unsafeGetTensorImpl()->_set_neg(t.is_neg());
    // A Python number (`x * 2`) promotes types more weakly than a 0-dim
    // tensor does; the C++ Meta kernels read that from this flag.
    if (t.unsafeGetTensorImpl()->is_wrapped_number()) {
      meta.unsafeGetTensorImpl()->set_wrapped_number(true);
    }
    return meta;
  });
}

TensorMeta describe(const at::Tensor& meta) {
  if (!meta.defined()) {
    return {false, {}, {}, 0, at::ScalarType::Undefined};
  }
  return {true,
          meta.sizes().vec(),
          meta.strides().vec(),
          meta.storage_offset(),
          meta.scalar_type(),
          meta.is_conj(),
          meta.is_neg()};
}

std::shared_ptr<const OutputMetadata> runMetaKernel(
    const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args) {
  const auto& schema_args = op.schema().arguments();
  torch::jit::Stack stack;
  stack.reserve(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    stack.push_back(metaArgument(schema_args[i], args[i]));
  }
  if (!runNativeMetaKernel(op, &stack)) {
    op.callBoxed(&stack);
  }
  auto result = std::make_shared<OutputMetadata>();
  for (const c10::IValue& value : stack) {
    ReturnMeta ret;
    if (value.isTensorList()) {
      ret.is_list = true;
      for (const at::Tensor& t : value.toTensorList())
        ret.tensors.push_back(describe(t));
    } else {
      ret.tensors.push_back(describe(value.toTensor()));
    }
    result->push_back(std::move(ret));
  }
  applyCpuOutputContract(op, args, *result);
  return result;
}

}  // namespace

std::shared_ptr<const OutputMetadata> outputMetadata(
    const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args) {
  thread_local std::unordered_map<Key, std::shared_ptr<const OutputMetadata>,
                                  KeyHash>
      cache;
  // Keys are built in one buffer per thread, so that a hit allocates nothing.
  thread_local Key scratch;
  if (!keyFor(op, args, scratch)) {
    return runMetaKernel(op, args);
  }
  auto hit = cache.find(scratch);
  if (hit != cache.end()) {
    return hit->second;
  }
  // Taken out of the buffer first: a Meta kernel may call ops itself.
  Key key = std::move(scratch);
  scratch = Key();
  scratch.reserve(key.capacity());
  auto computed = runMetaKernel(op, args);
  if (cache.size() >= kMaxEntries) {
    cache.clear();
  }
  cache.emplace(std::move(key), computed);
  return computed;
}

}  // namespace mydev
