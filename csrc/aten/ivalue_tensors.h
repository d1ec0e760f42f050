// Walking the tensors inside a boxed argument (a Tensor, a Tensor[] or a
// Tensor?[]), for code that rewrites arguments on their way to a kernel.
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

}  // namespace mydev
