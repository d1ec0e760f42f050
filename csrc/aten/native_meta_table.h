// The table behind native_meta_kernels.h: C++ Meta kernels by operator.
#pragma once

#include <ATen/core/boxing/KernelFunction.h>
#include <ATen/core/operator_name.h>

#include <unordered_map>
#include <utility>

namespace mydev {

class NativeMetaTable {
 public:
  // Lists `kernel` as the Meta kernel of aten op `name`.`overload`; the
  // explicit Signature (the op's dispatcher signature) picks the overload
  // of an at::meta function. A later entry replaces an earlier one.
  template <class Signature>
  void add(const char* name, const char* overload, Signature* kernel) {
    kernels_.insert_or_assign(
        c10::OperatorName(name, overload),
        c10::KernelFunction::makeFromUnboxedRuntimeFunction(kernel));
  }

  // Lists a boxed `kernel` as the Meta kernel of op `name`.
  void add(const c10::OperatorName& name, c10::KernelFunction kernel) {
    kernels_.insert_or_assign(name, std::move(kernel));
  }

  // The kernel listed for `name`, or null.
  const c10::KernelFunction* find(const c10::OperatorName& name) const {
    const auto found = kernels_.find(name);
    return found == kernels_.end() ? nullptr : &found->second;
  }

 private:
  std::unordered_map<c10::OperatorName, c10::KernelFunction> kernels_;
};

// Every structured op's at::meta kernels (functional, in-place and out=),
// from torch's native_functions.yaml: written at build time by
// generate_native_meta_table.py.
void addStructuredMetaKernels(NativeMetaTable& table);

// Hand-written Meta kernels of ops that have no at::meta kernel, family by
// family (layer_meta_kernels.cpp, activation_loss_meta_kernels.cpp,
// lookup_meta_kernels.cpp, sampling_meta_kernels.cpp).
void addLayerMetaKernels(NativeMetaTable& table);
void addActivationAndLossMetaKernels(NativeMetaTable& table);
void addLookupMetaKernels(NativeMetaTable& table);
void addSamplingMetaKernels(NativeMetaTable& table);
// The _foreach_* ops that loop over a per-tensor op listed before them
// (foreach_meta_kernels.cpp): added last.
void addForeachMetaKernels(NativeMetaTable& table);

}  // namespace mydev
