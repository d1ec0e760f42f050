// Every ATen op without a dedicated mydev kernel runs here, on the device,
// zero-copy: output metadata comes from the op's Meta kernel, outputs come from
// the mydev allocator, and the op's CPU kernel is enqueued on the current
// stream over host views of device memory (see host_view.h). Ops whose
// output shape depends on the data (nonzero, unique, ...) and ops returning
// host values (bool, Scalar) synchronize with the stream instead.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <mutex>
#include <optional>
#include <unordered_map>

#include "host_view.h"
#include "kernel_launch.h"

namespace mydev {
namespace {

using torch::jit::Stack;

// Ops that, as on CUDA, take index tensors from the host.
bool acceptsHostIndices(const c10::OperatorName& name) {
  return name.name == "aten::index" || name.name == "aten::index_put_" ||
         name.name == "aten::index_put" || name.name == "aten::_index_put_impl_";
}

[[noreturn]] void throwDeviceMismatch(c10::Device a, c10::Device b) {
  TORCH_CHECK(false,
              "Expected all tensors to be on the same device, but found at "
              "least two devices, ", a, " and ", b, "!");
}

// Applies `fn` to every tensor inside an argument (plain, optional or list),
// writing back what it returns.
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

template <typename Fn>
void forEachTensor(const c10::IValue& value, Fn&& fn) {
  (void)mapTensors(value, [&](const at::Tensor& t) {
    if (t.defined()) {
      fn(t);
    }
    return t;
  });
}

// Finds the mydev device of the call, moves host index tensors to it where
// the op allows that, and rejects any other mix of devices. 0-dim CPU
// tensors mix freely, as with cuda.
c10::Device resolveDevice(const c10::OperatorHandle& op,
                          c10::ArrayRef<c10::IValue> args, Stack* stack,
                          size_t first_arg) {
  std::optional<c10::Device> device;
  for (const c10::IValue& arg : args) {
    forEachTensor(arg, [&](const at::Tensor& t) {
      if (!t.device().is_privateuseone()) {
        return;
      }
      if (!device.has_value()) {
        device = t.device();
      } else if (*device != t.device()) {
        throwDeviceMismatch(*device, t.device());
      }
    });
  }
  TORCH_INTERNAL_ASSERT(device.has_value(), op.operator_name(),
                        " reached the mydev kernel without a mydev tensor");
  const bool host_indices_ok = acceptsHostIndices(op.operator_name());
  for (size_t i = 0; i < args.size(); ++i) {
    (*stack)[first_arg + i] = mapTensors(args[i], [&](const at::Tensor& t) {
      if (!t.defined() || t.device() == *device) {
        return t;
      }
      if (t.device().is_cpu() && t.dim() == 0) {
        return t;
      }
      if (t.device().is_cpu() && host_indices_ok) {
        return t.to(*device);
      }
      throwDeviceMismatch(*device, t.device());
    });
  }
  return *device;
}

// Metadata-only twin of an argument. 0-dim CPU scalars become meta too:
// type promotion treats a 0-dim tensor the same on any device, and some meta
// kernels (Python ones) refuse to mix devices.
at::Tensor metaLike(const at::Tensor& t) {
  return at::empty_strided(t.sizes(), t.strides(),
                           t.options().device(c10::kMeta));
}

c10::IValue hostViewsOf(const c10::IValue& value) {
  return mapTensors(value, [](const at::Tensor& t) {
    return t.device().is_privateuseone() ? hostView(t) : t;
  });
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

// Index of the argument a return aliases (same alias set), if any.
std::optional<size_t> aliasedArgument(const c10::FunctionSchema& schema,
                                      size_t return_index) {
  const c10::AliasInfo* ret_alias = schema.returns()[return_index].alias_info();
  if (ret_alias == nullptr) {
    return std::nullopt;
  }
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    const c10::AliasInfo* arg_alias = schema.arguments()[i].alias_info();
    if (arg_alias != nullptr && arg_alias->beforeSets() == ret_alias->beforeSets()) {
      return i;
    }
  }
  return std::nullopt;
}

// The out= overload of a functional op (aten::add.Tensor -> aten::add.out),
// when its schema is the functional one plus one out argument per return.
std::optional<c10::OperatorHandle> outVariantOf(const c10::OperatorHandle& op) {
  static std::mutex mutex;
  static std::unordered_map<c10::OperatorName, std::optional<c10::OperatorHandle>>
      cache;
  std::lock_guard<std::mutex> lock(mutex);
  const c10::OperatorName& name = op.operator_name();
  auto cached = cache.find(name);
  if (cached != cache.end()) {
    return cached->second;
  }
  const c10::FunctionSchema& schema = op.schema();
  std::optional<c10::OperatorHandle> found;
  for (const std::string& overload :
       {name.overload_name.empty() ? std::string("out")
                                   : name.overload_name + "_out",
        std::string("out")}) {
    auto candidate =
        c10::Dispatcher::singleton().findSchema({name.name, overload});
    if (!candidate.has_value()) {
      continue;
    }
    const c10::FunctionSchema& out_schema = candidate->schema();
    const size_t n_args = schema.arguments().size();
    if (out_schema.arguments().size() != n_args + schema.returns().size()) {
      continue;
    }
    bool matches = true;
    for (size_t i = 0; i < n_args && matches; ++i) {
      matches = out_schema.arguments()[i].name() == schema.arguments()[i].name() &&
                *out_schema.arguments()[i].real_type() ==
                    *schema.arguments()[i].real_type();
    }
    for (size_t i = n_args; i < out_schema.arguments().size() && matches; ++i) {
      matches = out_schema.arguments()[i].is_out();
    }
    if (matches) {
      found = candidate;
      break;
    }
  }
  cache.emplace(name, found);
  return found;
}

// A view of `base` shaped like the Meta kernel's output `meta`, whose dtype
// may differ (view_as_real, view(dtype)). The meta input started at offset
// 0, so meta's offset is relative to base's first element; offsets are
// converted through bytes because the element sizes may differ.
at::Tensor viewOf(const at::Tensor& base, const at::Tensor& meta) {
  const int64_t byte_offset = base.storage_offset() * base.element_size() +
                              meta.storage_offset() * meta.element_size();
  TORCH_INTERNAL_ASSERT(byte_offset % meta.element_size() == 0,
                        "view offset is not a multiple of the element size");
  auto view = at::detail::make_tensor<c10::TensorImpl>(
      c10::TensorImpl::VIEW, c10::Storage(base.storage()), base.key_set(),
      meta.dtype());
  view.unsafeGetTensorImpl()->set_sizes_and_strides(
      meta.sizes(), meta.strides(), byte_offset / meta.element_size());
  return view;
}

// Data-dependent shapes and host-valued results: run the CPU kernel as a
// kernel, wait for it, and bring tensor results back to the device. An
// exception keeps its Python type (IndexError stays IndexError).
void runAndSynchronize(const c10::OperatorHandle& op, Stack* stack,
                       size_t first_arg, c10::Device device) {
  const c10::FunctionSchema& schema = op.schema();
  const size_t n_args = schema.arguments().size();
  struct Outcome {
    Stack stack;
    std::exception_ptr error;
  };
  auto outcome = std::make_shared<Outcome>();
  // out= arguments get host tensors the CPU kernel may resize (host views
  // of device memory cannot grow); their contents go to the device after.
  std::vector<std::pair<size_t, at::Tensor>> host_outs;
  for (size_t i = 0; i < n_args; ++i) {
    const c10::IValue& arg = (*stack)[first_arg + i];
    if (schema.arguments()[i].is_out() && arg.isTensor()) {
      at::Tensor host_out = at::empty({0}, arg.toTensor().options().device(c10::kCPU));
      host_outs.emplace_back(i, host_out);
      outcome->stack.push_back(host_out);
    } else {
      outcome->stack.push_back(hostViewsOf(arg));
    }
  }
  const std::vector<c10::IValue> device_args(stack->begin() + first_arg,
                                             stack->end());
  launchKernel(op.operator_name().name.c_str(), [op, outcome] {
    try {
      op.callBoxed(&outcome->stack);
    } catch (...) {
      outcome->error = std::current_exception();
    }
  });
  getCurrentStream().synchronize();
  if (outcome->error) {
    std::rethrow_exception(outcome->error);
  }
  for (const auto& [index, host_out] : host_outs) {
    const at::Tensor& device_out = device_args[index].toTensor();
    device_out.resize_(host_out.sizes());
    device_out.copy_(host_out);
  }
  torch::jit::drop(*stack, n_args);
  for (size_t r = 0; r < outcome->stack.size(); ++r) {
    const std::optional<size_t> aliased = aliasedArgument(schema, r);
    if (aliased.has_value()) {
      stack->push_back(device_args[*aliased]);  // in-place / out=: same tensor
      continue;
    }
    stack->push_back(mapTensors(outcome->stack[r], [&](const at::Tensor& t) {
      return t.to(device);
    }));
  }
}

void runOnDevice(const c10::OperatorHandle& op, c10::DispatchKeySet,
                 Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  const size_t n_args = schema.arguments().size();
  const size_t first_arg = stack->size() - n_args;
  const c10::Device device = resolveDevice(
      op, c10::ArrayRef<c10::IValue>(stack->data() + first_arg, n_args), stack,
      first_arg);
  TORCH_CHECK_NOT_IMPLEMENTED(
      op.hasComputedKernelForDispatchKey(c10::DispatchKey::CPU),
      "mydev has no kernel for ", op.operator_name(),
      ": the operator has no CPU kernel for the simulator to run on the "
      "device either.");
  const c10::DeviceGuard guard(device);
  const at::AutoDispatchBelowADInplaceOrView below_autograd;

  if (!returnsOnlyTensors(schema)) {
    runAndSynchronize(op, stack, first_arg, device);
    return;
  }

  // Output metadata from the Meta kernel.
  Stack meta_stack;
  meta_stack.reserve(n_args);
  for (size_t i = 0; i < n_args; ++i) {
    meta_stack.push_back(mapTensors((*stack)[first_arg + i], metaLike));
  }
  try {
    op.callBoxed(&meta_stack);
  } catch (const std::exception&) {
    // No Meta kernel, one that needs the data, or one (some are Python)
    // that can't handle this call: compute synchronously instead. Genuine
    // input errors are raised again from there, by the CPU kernel, with
    // the CPU's exception type.
    runAndSynchronize(op, stack, first_arg, device);
    return;
  }

  const std::vector<c10::IValue> device_args(stack->begin() + first_arg,
                                             stack->end());
  std::vector<c10::IValue> outputs;
  bool fresh_outputs = false;
  for (size_t r = 0; r < meta_stack.size(); ++r) {
    const std::optional<size_t> aliased = aliasedArgument(schema, r);
    const c10::AliasInfo* alias = schema.returns()[r].alias_info();
    if (aliased.has_value() && alias->isWrite()) {
      // In-place or out=: the Meta kernel may have resized the output.
      at::Tensor target = device_args[*aliased].toTensor();
      const at::Tensor& meta = meta_stack[r].toTensor();
      if (target.sizes() != meta.sizes() || target.strides() != meta.strides()) {
        target.resize_(meta.sizes());
        target.unsafeGetTensorImpl()->set_sizes_and_strides(
            meta.sizes(), meta.strides(), target.storage_offset());
      }
      outputs.push_back(target);
    } else if (aliased.has_value()) {
      outputs.push_back(viewOf(device_args[*aliased].toTensor(),
                               meta_stack[r].toTensor()));
    } else {
      fresh_outputs = true;
      outputs.push_back(mapTensors(meta_stack[r], [&](const at::Tensor& meta) {
        return at::empty_strided(meta.sizes(), meta.strides(),
                                 meta.options().device(device));
      }));
    }
  }
  bool is_view_only = !fresh_outputs;
  for (size_t r = 0; r < outputs.size() && is_view_only; ++r) {
    const c10::AliasInfo* alias = schema.returns()[r].alias_info();
    is_view_only = alias != nullptr && !alias->isWrite();
  }
  if (is_view_only && !outputs.empty()) {
    torch::jit::drop(*stack, n_args);
    for (auto& out : outputs) {
      stack->push_back(std::move(out));
    }
    return;
  }

  // Build the kernel's stack of host views now, on the host thread.
  Stack kernel_stack;
  for (const c10::IValue& arg : device_args) {
    kernel_stack.push_back(hostViewsOf(arg));
  }
  std::optional<c10::OperatorHandle> out_variant;
  std::vector<c10::IValue> host_outputs;
  if (fresh_outputs) {
    out_variant = outVariantOf(op);
    for (const c10::IValue& out : outputs) {
      host_outputs.push_back(hostViewsOf(out));
    }
    if (out_variant.has_value()) {
      for (const c10::IValue& out : host_outputs) {
        kernel_stack.push_back(out);
      }
    }
  }
  const c10::OperatorHandle to_run = out_variant.value_or(op);
  const bool copy_results = fresh_outputs && !out_variant.has_value();
  launchKernel(op.operator_name().name.c_str(),
               [to_run, copy_results, kernel_stack = std::move(kernel_stack),
                host_outputs = std::move(host_outputs)]() mutable {
                 to_run.callBoxed(&kernel_stack);
                 if (!copy_results) {
                   return;
                 }
                 // No out= overload: the CPU kernel allocated its results on
                 // the host; move them into the device outputs.
                 for (size_t r = 0; r < host_outputs.size(); ++r) {
                   if (host_outputs[r].isTensor()) {
                     host_outputs[r].toTensor().copy_(kernel_stack[r].toTensor());
                   } else if (host_outputs[r].isTensorList()) {
                     auto dst = host_outputs[r].toTensorList();
                     auto src = kernel_stack[r].toTensorList();
                     for (size_t i = 0; i < dst.size(); ++i) {
                       dst.get(i).copy_(src.get(i));
                     }
                   }
                 }
               });
  torch::jit::drop(*stack, n_args);
  for (auto& out : outputs) {
    stack->push_back(std::move(out));
  }
}

}  // namespace

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&runOnDevice>());
}

}  // namespace mydev
