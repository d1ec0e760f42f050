#include "meta_cache.h"

#include <ATen/core/stack.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/DefaultDtype.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

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
// bounds of a range (scalarValuesMatter). Keying on values would miss the
// cache whenever a value changes, e.g. an optimizer's bias corrections
// every step; the key holds each value's class instead (scalarClass).
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

// A range's bounds shape its output, and histc's Meta kernel compares its
// two bounds with each other.
bool scalarValuesMatter(const c10::OperatorName& name) {
  return name.name == "aten::arange" || name.name == "aten::range" ||
         name.name == "aten::histc";
}

int64_t scalarKind(const c10::IValue& value) {
  if (value.isBool()) return kBool;
  if (value.isInt()) return kInt;
  if (value.isDouble()) return kDouble;
  if (value.isComplexDouble()) return kComplex;
  return kOpaque;
}

// What Meta kernels check of a Scalar's value beyond its kind: its sign
// (elu_backward and leaky_relu_backward refuse a negative slope on a
// result, softshrink a negative lambda, renorm a norm that isn't positive,
// pow an integer tensor to a negative integer power), NaN and infinity
// (vector_norm's -inf on an empty tensor), and the floating dtypes it fits
// (softshrink's lambda must fit the input's). Values of one class pass or
// fail those checks together; a cache hit keyed on the kind alone let a
// refused value through to the kernel, raised at the next synchronize
// instead of at the call.
int64_t scalarClass(const c10::IValue& value) {
  if (value.isBool()) {
    return value.toBool() ? 1 : 0;
  }
  if (!value.isInt() && !value.isDouble()) {
    return 0;  // a complex value: Meta kernels check its kind only
  }
  const double v =
      value.isInt() ? static_cast<double>(value.toInt()) : value.toDouble();
  if (std::isnan(v)) {
    return -1;
  }
  // The narrowest of Half, BFloat16 and float that the magnitude fits (3:
  // none of them; 4: infinite).
  const double limits[] = {
      static_cast<double>(std::numeric_limits<c10::Half>::max()),
      static_cast<double>(std::numeric_limits<c10::BFloat16>::max()),
      static_cast<double>(std::numeric_limits<float>::max())};
  const double magnitude = std::abs(v);
  int64_t fits = 0;
  while (fits < 3 && magnitude > limits[fits]) {
    ++fits;
  }
  if (std::isinf(v)) {
    fits = 4;
  }
  const int64_t sign = v < 0 ? 0 : (v == 0 ? 1 : 2);
  return 2 + sign * 8 + fits;
}

// How an argument's value enters the key.
enum class KeyedAs : uint8_t {
  kPresence,    // a device or generator: replaced for the Meta kernel
  kScalarKind,  // a scalar: its kind and class (scalarClass)
  kValue,
};

// What the cache reads from an op's schema at every call: fixed for the
// op, so read once (operatorFact), not from the argument types at every
// call (about a third of a cache hit's time, by perf).
struct ArgumentFacts {
  // How each argument enters the key.
  std::vector<KeyedAs> keying;
  // The single tensors the op writes: out= arguments, and self of an
  // in-place op.
  std::vector<size_t> written;
};

ArgumentFacts argumentFactsOf(const c10::OperatorHandle& op) {
  const bool scalar_values_matter = scalarValuesMatter(op.operator_name());
  const auto& arguments = op.schema().arguments();
  ArgumentFacts facts;
  for (size_t i = 0; i < arguments.size(); ++i) {
    const c10::Argument& argument = arguments[i];
    if (argumentKind(argument) != ArgumentKind::Other) {
      facts.keying.push_back(KeyedAs::kPresence);
    } else if (!scalar_values_matter && isScalarArgument(argument)) {
      facts.keying.push_back(KeyedAs::kScalarKind);
    } else {
      facts.keying.push_back(KeyedAs::kValue);
    }
    if (argument.alias_info() != nullptr && argument.alias_info()->isWrite() &&
        *argument.real_type() == *c10::TensorType::get()) {
      facts.written.push_back(i);
    }
  }
  return facts;
}

// Appends what the Meta kernel's result can depend on; false if the value
// is of a kind we don't know how to key (then nothing is cached).
bool appendValue(Key& key, KeyedAs how, const c10::IValue& value) {
  if (how == KeyedAs::kPresence) {
    key.push_back(value.isNone() ? kNone : kOpaque);
    return true;
  }
  if (how == KeyedAs::kScalarKind && !value.isList()) {
    if (value.isNone()) {
      key.push_back(kNone);
    } else {
      key.push_back(scalarKind(value));
      key.push_back(scalarClass(value));
    }
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

// The argument that a written tensor also is (the same tensor passed
// twice, as the in-place ops' generic kernel passes self as out=), or -1.
// It enters the key and the Meta kernel sees one tensor for both, since
// Meta kernels refuse some of these calls (gather's out= may not be its
// input) and accept others (an elementwise op's may).
int64_t sameTensorAs(c10::ArrayRef<c10::IValue> args, size_t written) {
  if (!args[written].isTensor() || !args[written].toTensor().defined()) {
    return -1;
  }
  const at::Tensor& target = args[written].toTensor();
  for (size_t i = 0; i < args.size(); ++i) {
    if (i != written && args[i].isTensor() &&
        args[i].toTensor().is_same(target)) {
      return static_cast<int64_t>(i);
    }
  }
  return -1;
}

// Fills `key` (cleared first); false if an argument can't be keyed.
bool keyFor(const c10::OperatorHandle& op, const ArgumentFacts& facts,
            c10::ArrayRef<c10::IValue> args, Key& key) {
  key.clear();
  key.push_back(reinterpret_cast<int64_t>(&op.schema()));
  // Factory functions without a dtype use the default dtype.
  key.push_back(static_cast<int64_t>(
      c10::typeMetaToScalarType(c10::get_default_dtype())));
  for (size_t i = 0; i < args.size(); ++i) {
    if (!appendValue(key, facts.keying[i], args[i])) {
      return false;
    }
  }
  for (const size_t written : facts.written) {
    key.push_back(sameTensorAs(args, written));
  }
  return true;
}

// True if the call writes a tensor that shares memory with another of its
// tensor arguments, other than by being that same tensor (which the key
// and the cached Meta run already hold: sameTensorAs). Lists that are
// written (the foreach ops') are not compared: n tensors against n others
// at every optimizer step.
bool writesSharedMemory(const ArgumentFacts& facts,
                        c10::ArrayRef<c10::IValue> args) {
  for (const size_t index : facts.written) {
    if (args[index].isTensor() &&
        sharesStorageWithAnotherArgument(args, index, SameTensor::kIgnored)) {
      return true;
    }
  }
  return false;
}

// Meta storages standing for the device storages of one call's tensors:
// tensors that share memory on the device share a meta storage, at the
// same offsets and strides, so that the Meta kernel's overlap checks see
// what the CPU kernel's would. (Calls that write an argument return it or
// fresh tensors, never views, so the absolute offsets are never read back
// as a view's.)
class SharedMemoryStandIns {
 public:
  at::Tensor standIn(const at::Tensor& t) {
    const c10::Storage& meta = metaStorageFor(t.storage());
    at::Tensor stand_in = at::detail::make_tensor<c10::TensorImpl>(
        c10::Storage(meta), meta_keys_, t.dtype());
    stand_in.unsafeGetTensorImpl()->set_sizes_and_strides(
        t.sizes(), t.strides(), t.storage_offset());
    return stand_in;
  }

 private:
  const c10::Storage& metaStorageFor(const c10::Storage& device) {
    for (const auto& [impl, meta] : storages_) {
      if (impl == device.unsafeGetStorageImpl()) {
        return meta;
      }
    }
    at::Tensor bytes =
        at::empty({static_cast<int64_t>(device.nbytes())},
                  at::TensorOptions().dtype(at::kByte).device(c10::kMeta));
    meta_keys_ = bytes.key_set();
    storages_.emplace_back(device.unsafeGetStorageImpl(), bytes.storage());
    return storages_.back().second;
  }

  std::vector<std::pair<const c10::StorageImpl*, c10::Storage>> storages_;
  c10::DispatchKeySet meta_keys_;
};

// The argument as the Meta kernel sees it: metadata-only tensors (0-dim CPU
// scalars too: type promotion treats a 0-dim tensor the same on any device,
// and some meta kernels refuse to mix devices), the meta device and no
// generator. With `shared`, device tensors stand in on the meta storages
// that keep their sharing of memory.
c10::IValue metaArgument(const c10::Argument& schema_arg,
                         const c10::IValue& value,
                         SharedMemoryStandIns* shared) {
  switch (argumentKind(schema_arg)) {
    case ArgumentKind::Device:
      return value.isNone() ? value : c10::IValue(c10::Device(c10::kMeta));
    case ArgumentKind::Generator: return c10::IValue();
    case ArgumentKind::Other: break;
  }
  return mapTensors(value, [shared](const at::Tensor& t) {
    if (!t.defined()) {
      return t;
    }
    at::Tensor meta = shared != nullptr && t.device().is_privateuseone()
                          ? shared->standIn(t)
                          : at::empty_strided(t.sizes(), t.strides(),
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
    const c10::OperatorHandle& op, const ArgumentFacts& facts,
    c10::ArrayRef<c10::IValue> args, SharedMemoryStandIns* shared = nullptr) {
  const auto& schema_args = op.schema().arguments();
  torch::jit::Stack stack;
  stack.reserve(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    stack.push_back(metaArgument(schema_args[i], args[i], shared));
  }
  for (const size_t written : facts.written) {
    const int64_t same = sameTensorAs(args, written);
    if (same >= 0) {
      stack[written] = stack[same];
    }
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

// Many Meta kernels hold ATen's overlap checks (gather's, TensorIterator's
// for every elementwise op), which raise at the call on the CPU and on
// cuda; tensors made from metadata alone share nothing, so a call writing a
// view of another argument's storage runs the Meta kernel once more, on
// meta tensors sharing memory as the device tensors do. Not cached: the
// key does not hold how views overlap.
void checkOverlapsOfWrittenArguments(const c10::OperatorHandle& op,
                                     const ArgumentFacts& facts,
                                     c10::ArrayRef<c10::IValue> args) {
  if (!writesSharedMemory(facts, args)) {
    return;
  }
  SharedMemoryStandIns shared;
  try {
    runMetaKernel(op, facts, args, &shared);
  } catch (const std::exception&) {
    throw ArgumentOverlapError{std::current_exception()};
  }
}

// The Meta kernel's result for the call, from this thread's cache.
std::shared_ptr<const OutputMetadata> cachedMetadata(
    const c10::OperatorHandle& op, const ArgumentFacts& facts,
    c10::ArrayRef<c10::IValue> args) {
  thread_local std::unordered_map<Key, std::shared_ptr<const OutputMetadata>,
                                  KeyHash>
      cache;
  // Keys are built in one buffer per thread, so that a hit allocates nothing.
  thread_local Key scratch;
  if (!keyFor(op, facts, args, scratch)) {
    return runMetaKernel(op, facts, args);
  }
  auto hit = cache.find(scratch);
  if (hit != cache.end()) {
    return hit->second;
  }
  // Taken out of the buffer first: a Meta kernel may call ops itself.
  Key key = std::move(scratch);
  scratch = Key();
  scratch.reserve(key.capacity());
  auto computed = runMetaKernel(op, facts, args);
  if (cache.size() >= kMaxEntries) {
    cache.clear();
  }
  cache.emplace(std::move(key), computed);
  return computed;
}

}  // namespace

std::shared_ptr<const OutputMetadata> outputMetadata(
    const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args) {
  const ArgumentFacts& facts = operatorFact<&argumentFactsOf>(op);
  auto metadata = cachedMetadata(op, facts, args);
  checkOverlapsOfWrittenArguments(op, facts, args);
  return metadata;
}

}  // namespace mydev
