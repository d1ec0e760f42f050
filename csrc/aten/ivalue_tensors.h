// Walking the tensors inside a boxed argument (a Tensor, a Tensor[] or a
// Tensor?[]), for code that rewrites arguments on their way to a kernel or
// asks how a call's arguments share memory.
#pragma once

#include <ATen/core/List.h>
#include <ATen/core/ivalue.h>

#include <optional>

namespace mydev {

// Applies `fn` to every tensor inside `value` (absent elements of a
// Tensor?[] stay absent) and returns the argument rebuilt from the results;
// any other value comes back unchanged.
template <typename Fn>
c10::IValue mapTensors(const c10::IValue& value, Fn&& fn) {
  if (value.isTensor()) {
    return fn(value.toTensor());
  }
  if (value.isTensorList()) {
    c10::List<at::Tensor> mapped;
    for (const at::Tensor& t : value.toTensorList()) {
      mapped.push_back(fn(t));
    }
    return mapped;
  }
  if (value.isOptionalTensorList()) {
    c10::List<std::optional<at::Tensor>> mapped;
    for (const std::optional<at::Tensor>& t : value.toOptionalTensorList()) {
      mapped.push_back(t.has_value() && t->defined()
                           ? std::optional<at::Tensor>(fn(*t))
                           : std::nullopt);
    }
    return mapped;
  }
  return value;
}

// Calls `fn` on every defined tensor inside `value` (building nothing: every
// op on the device-kernel path walks its arguments this way).
template <typename Fn>
void forEachTensor(const c10::IValue& value, Fn&& fn) {
  if (value.isTensor()) {
    if (value.toTensor().defined()) {
      fn(value.toTensor());
    }
  } else if (value.isTensorList()) {
    for (const at::Tensor& t : value.toTensorList()) {
      if (t.defined()) {
        fn(t);
      }
    }
  } else if (value.isOptionalTensorList()) {
    for (const std::optional<at::Tensor>& t : value.toOptionalTensorList()) {
      if (t.has_value() && t->defined()) {
        fn(*t);
      }
    }
  }
}

// Whether the same tensor passed twice counts as sharing memory.
enum class SameTensor : bool { kCounts, kIgnored };

// True if the tensor argument `index` shares storage with a tensor inside
// another argument of the call. The synchronous path counts the same
// tensor passed again (its CPU kernel must see the sharing); the Meta
// cache does not (its key already holds that case).
inline bool sharesStorageWithAnotherArgument(c10::ArrayRef<c10::IValue> args,
                                             size_t index,
                                             SameTensor same_tensor) {
  const at::Tensor& target = args[index].toTensor();
  if (!target.defined() || !target.has_storage()) {
    return false;
  }
  bool shared = false;
  for (size_t i = 0; i < args.size() && !shared; ++i) {
    if (i == index) {
      continue;
    }
    forEachTensor(args[i], [&](const at::Tensor& t) {
      shared = shared ||
               (t.has_storage() && t.storage().is_alias_of(target.storage()) &&
                (same_tensor == SameTensor::kCounts || !t.is_same(target)));
    });
  }
  return shared;
}

}  // namespace mydev
