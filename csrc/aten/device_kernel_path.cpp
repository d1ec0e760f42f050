// Every ATen op without a dedicated mydev kernel runs here, on the device,
// zero-copy: output metadata comes from the op's Meta kernel, outputs come from
// the mydev allocator, and the op's CPU kernel is enqueued on the current
// stream over host views of device memory (see host_view.h). Ops whose
// output shape depends on the data (nonzero, unique, ...) and ops returning
// host values (bool, Scalar) synchronize with the stream instead. Random ops
// draw from the mydev generator (device_randomness.h). Operators outside
// ATen follow the CPU fallback policy (cpu_fallback_policy.h).
#include <ATen/EmptyTensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/SmallVector.h>
#include <torch/library.h>

#include <algorithm>
#include <optional>

#include "../core/caching_allocator.h"
#include "../core/device.h"
#include "beyond_cpu_dtypes.h"
#include "cpu_fallback_policy.h"
#include "cpu_kernel_checks.h"
#include "device_kernel_path.h"
#include "device_randomness.h"
#include "host_view.h"
#include "index_rows.h"
#include "ivalue_tensors.h"
#include "kernel_launch.h"
#include "kernel_results.h"
#include "matrix_vector_product.h"
#include "meta_cache.h"
#include "native_elementwise.h"
#include "op_schema.h"

namespace mydev {
namespace {

using torch::jit::Stack;

// The device's kernel library: ATen's operators (and their primitives).
bool hasDeviceKernels(const c10::OperatorName& name) {
  return name.name.rfind("aten::", 0) == 0 ||
         name.name.rfind("prims::", 0) == 0;
}

// Ops that, as on CUDA, take index tensors from the host (moved to the
// device).
bool acceptsHostIndices(const c10::OperatorName& name) {
  return name.name == "aten::index" || name.name == "aten::index_put_" ||
         name.name == "aten::index_put" ||
         name.name == "aten::_index_put_impl_";
}

// The argument of the _foreach_* overloads that take their numbers as a
// host tensor (`Tensor scalars`, one per position), which the kernel reads
// on the host, as on CUDA. Their other tensors, like any op's, are on the
// device or 0-dim host scalars.
std::optional<size_t> hostScalarsArgument(const c10::OperatorHandle& op) {
  if (!isForeachOp(op.operator_name())) {
    return std::nullopt;
  }
  const auto& arguments = op.schema().arguments();
  for (size_t i = 0; i < arguments.size(); ++i) {
    if (arguments[i].name() == "scalars" &&
        *arguments[i].type() == *c10::TensorType::get()) {
      return i;
    }
  }
  return std::nullopt;
}

// What the path asks about an ATen operator on each call, beyond its
// arguments: fixed for the operator, so read once (operatorFact).
struct OperatorTraits {
  // Returns host values, or outputs whose shapes depend on the data.
  bool synchronous;
  bool takes_generator;
  bool accepts_host_indices;
  std::optional<size_t> host_scalars_argument;
  // The out= overload whose CPU kernel writes into the outputs it is given
  // (one that copies the functional kernel's results does nothing the
  // device needs).
  std::optional<c10::OperatorHandle> writing_out_variant;
  // What the CPU kernel checks before computing that the Meta kernel
  // does not (cpu_kernel_checks.h); usually none.
  CpuKernelCheck cpu_kernel_check;
  // What it checks after the Meta kernel's checks: for a launch on the
  // stream only (cpuKernelCheckAfterMetaFor).
  CpuKernelCheck cpu_kernel_check_after_meta;
};

OperatorTraits traitsOf(const c10::OperatorHandle& op) {
  std::optional<c10::OperatorHandle> out_variant = outVariantOf(op);
  if (out_variant.has_value() && outVariantCopiesResults(*out_variant)) {
    out_variant.reset();
  }
  return {!returnsOnlyTensors(op.schema()) || outputsShapedByTheData(op),
          takesGenerator(op.schema()),
          acceptsHostIndices(op.operator_name()),
          hostScalarsArgument(op),
          out_variant,
          cpuKernelCheckFor(op.operator_name()),
          cpuKernelCheckAfterMetaFor(op.operator_name())};
}

// The mydev device of the call: its mydev tensors' device or, for factory
// functions, the device argument. Moves host index tensors to it where the
// op allows that and rejects any other mix of devices; 0-dim CPU tensors
// mix freely, as with cuda.
c10::Device resolveDevice(const c10::OperatorHandle& op,
                          const OperatorTraits& traits, Stack* stack,
                          size_t first_arg) {
  const c10::FunctionSchema& schema = op.schema();
  std::optional<c10::Device> device;
  bool all_on_device = true;
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    const c10::IValue& arg = (*stack)[first_arg + i];
    forEachTensor(arg, [&](const at::Tensor& t) {
      if (!t.device().is_privateuseone()) {
        all_on_device = false;
        return;
      }
      if (!device.has_value()) {
        device = t.device();
      } else if (*device != t.device()) {
        throwDeviceMismatch(*device, t.device());
      }
    });
    if (!device.has_value() &&
        argumentKind(schema.arguments()[i]) == ArgumentKind::Device &&
        arg.isDevice() && arg.toDevice().is_privateuseone()) {
      device = arg.toDevice();
    }
  }
  if (!device.has_value()) {
    // Only a mydev generator brought the call here: a CPU op was given it.
    TORCH_CHECK(false, op.operator_name(),
                ": Expected a 'cpu' device type for generator but found '",
                kDeviceName, "'");
  }
  if (!device->has_index()) {
    device = c10::Device(c10::DeviceType::PrivateUse1, currentDevice());
  }
  if (all_on_device) {
    return *device;  // the usual call: nothing to move or reject
  }
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    c10::IValue& arg = (*stack)[first_arg + i];
    arg = mapTensors(arg, [&](const at::Tensor& t) {
      if (!t.defined() || t.device() == *device) {
        return t;
      }
      if (t.device().is_cpu() &&
          (t.dim() == 0 || traits.host_scalars_argument == i)) {
        return t;
      }
      if (t.device().is_cpu() && traits.accepts_host_indices) {
        return t.to(*device);
      }
      throwDeviceMismatch(*device, t.device());
    });
  }
  return *device;
}

// What a random kernel may draw: one number per element of its largest
// tensor, which bounds what ATen's random CPU kernels consume. Only random
// ops (those taking a Generator) need the count.
struct RandomDraws {
  c10::DeviceIndex device;
  uint64_t count;
};

// Device tensors inside an argument as host views; everything else as is.
// Undefined tensors stand for absent optional arguments (autograd passes
// them so); they stay absent.
c10::IValue hostViewsOf(const c10::IValue& value) {
  return mapTensors(value, [](const at::Tensor& t) {
    return t.defined() && t.device().is_privateuseone() ? sharedHostView(t) : t;
  });
}

// The argument as the CPU kernel inside a device kernel should see it: host
// views of device memory, the CPU device, and a generator seeded from the
// mydev one.
c10::IValue hostArgument(const c10::Argument& schema_arg,
                         const c10::IValue& value, const RandomDraws& draws) {
  switch (argumentKind(schema_arg)) {
    case ArgumentKind::Device:
      return value.isNone() ? value : c10::IValue(c10::Device(c10::kCPU));
    case ArgumentKind::Generator:
      return hostGeneratorFor(value.toOptional<at::Generator>(), draws.device,
                              draws.count);
    case ArgumentKind::Other: break;
  }
  return hostViewsOf(value);
}

uint64_t largestNumel(c10::ArrayRef<c10::IValue> values) {
  int64_t largest = 1;
  for (const c10::IValue& value : values) {
    forEachTensor(value, [&](const at::Tensor& t) {
      largest = std::max(largest, t.numel());
    });
  }
  return static_cast<uint64_t>(largest);
}

// A view of `base` shaped like the Meta kernel's output `meta`, whose dtype
// may differ (view_as_real, view(dtype)). The meta input started at offset
// 0, so meta's offset is relative to base's first element; offsets are
// converted through bytes because the element sizes may differ.
at::Tensor viewOf(const at::Tensor& base, const TensorMeta& meta) {
  const int64_t item_size = static_cast<int64_t>(c10::elementSize(meta.dtype));
  const int64_t byte_offset = base.storage_offset() * base.element_size() +
                              meta.storage_offset * item_size;
  TORCH_INTERNAL_ASSERT(byte_offset % item_size == 0,
                        "view offset is not a multiple of the element size");
  auto view = at::detail::make_tensor<c10::TensorImpl>(
      c10::TensorImpl::VIEW, c10::Storage(base.storage()), base.key_set(),
      c10::scalarTypeToTypeMeta(meta.dtype));
  c10::TensorImpl* impl = view.unsafeGetTensorImpl();
  impl->set_sizes_and_strides(meta.sizes, meta.strides,
                              byte_offset / item_size);
  impl->_set_conj(meta.is_conj);
  impl->_set_neg(meta.is_neg);
  return view;
}

// A new device tensor laid out as the Meta kernel said (including its
// conjugate/negative bits), straight from the allocator (the current device
// is the op's).
at::Tensor allocateLike(const TensorMeta& meta) {
  if (!meta.defined) {
    return at::Tensor();
  }
  at::Tensor fresh = at::detail::empty_strided_generic(
      meta.sizes, meta.strides, &cachingAllocator(),
      c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), meta.dtype);
  // Some ops return lazy conjugate/negative results (linalg.lu_solve with
  // left=False): the kernel writes the raw values, the bit says how to read
  // them.
  fresh.unsafeGetTensorImpl()->_set_conj(meta.is_conj);
  fresh.unsafeGetTensorImpl()->_set_neg(meta.is_neg);
  return fresh;
}

// A host result on the device in the CPU kernel's layout (column-major
// LAPACK results stay column-major), where `to` would make dense results
// contiguous.
at::Tensor toDeviceKeepingLayout(const at::Tensor& t, c10::Device device) {
  if (!t.defined() || t.is_conj() || t.is_neg() ||
      !t.is_non_overlapping_and_dense() || t.is_contiguous()) {
    return t.defined() ? t.to(device) : t;
  }
  at::Tensor on_device =
      at::empty_strided(t.sizes(), t.strides(), t.options().device(device));
  on_device.copy_(t);
  return on_device;
}

// Data-dependent shapes and host-valued results: run the CPU kernel as a
// kernel, wait for it, and bring tensor results back to the device. An
// exception keeps its Python type (IndexError stays IndexError).
void runAndSynchronize(const c10::OperatorHandle& op,
                       const OperatorTraits& traits, Stack* stack,
                       size_t first_arg, c10::Device device) {
  const c10::FunctionSchema& schema = op.schema();
  const size_t n_args = schema.arguments().size();
  struct Outcome {
    Stack stack;
  };
  auto outcome = std::make_shared<Outcome>();
  const std::vector<c10::IValue> device_args(stack->begin() + first_arg,
                                             stack->end());
  const RandomDraws draws{
      device.index(), traits.takes_generator ? largestNumel(device_args) : 0};
  // out= arguments get host tensors the CPU kernel may resize (host views
  // of device memory cannot grow); their contents go to the device after.
  // One that shares memory with another argument gets its host view, so
  // that the CPU kernel sees the sharing and refuses it as on the CPU.
  std::vector<std::pair<size_t, at::Tensor>> host_outs;
  for (size_t i = 0; i < n_args; ++i) {
    const c10::IValue& arg = device_args[i];
    if (schema.arguments()[i].is_out() && arg.isTensor() &&
        !sharesStorageWithAnotherArgument(device_args, i,
                                          SameTensor::kCounts)) {
      at::Tensor host_out =
          at::empty({0}, arg.toTensor().options().device(c10::kCPU));
      host_outs.emplace_back(i, host_out);
      outcome->stack.push_back(host_out);
    } else {
      outcome->stack.push_back(hostArgument(schema.arguments()[i], arg, draws));
    }
  }
  const std::optional<HostKernel> beyond_cpu =
      kernelBeyondCpuDtypes(op, device_args);
  runKernelAndWait(op.operator_name().name.c_str(), [op, outcome, beyond_cpu] {
    if (beyond_cpu.has_value()) {
      (*beyond_cpu)(op, &outcome->stack);
    } else {
      op.callBoxed(&outcome->stack);
    }
  });
  for (const auto& [index, host_out] : host_outs) {
    copyOutArgument(host_out, device_args[index].toTensor());
  }
  torch::jit::drop(*stack, n_args);
  for (size_t r = 0; r < outcome->stack.size(); ++r) {
    const std::optional<size_t> aliased = aliasedArgument(schema, r);
    if (aliased.has_value()) {
      stack->push_back(device_args[*aliased]);  // in-place / out=: same tensor
      continue;
    }
    stack->push_back(mapTensors(outcome->stack[r], [&](const at::Tensor& t) {
      return toDeviceKeepingLayout(t, device);
    }));
  }
}

// The device tensors an op returns, given what its Meta kernel returned:
// in-place and out= returns are their (maybe resized) arguments, views are
// views of their base, everything else is freshly allocated.
struct DeviceOutputs {
  // Inline: most ops return one tensor, and a heap vector here was one of
  // the mallocs a small op makes beyond the CPU's.
  c10::SmallVector<c10::IValue, 1> values;
  bool fresh = false;           // some output is newly allocated
  bool views_only = true;       // every output is a view (nothing to compute)
  bool some_undefined = false;  // e.g. gradients a backward op was told to skip
};

DeviceOutputs deviceOutputsFor(const c10::FunctionSchema& schema,
                               const OutputMetadata& metadata,
                               c10::ArrayRef<c10::IValue> device_args) {
  DeviceOutputs outputs;
  outputs.values.reserve(metadata.size());
  for (size_t r = 0; r < metadata.size(); ++r) {
    const ReturnMeta& ret = metadata[r];
    const std::optional<size_t> aliased = aliasedArgument(schema, r);
    const c10::AliasInfo* alias = schema.returns()[r].alias_info();
    if (aliased.has_value() && alias->isWrite() && !ret.is_list) {
      at::Tensor target = device_args[*aliased].toTensor();
      const TensorMeta& meta = ret.tensors[0];
      if (target.sizes() != meta.sizes || target.strides() != meta.strides) {
        target.resize_(meta.sizes);
        target.unsafeGetTensorImpl()->set_sizes_and_strides(
            meta.sizes, meta.strides, target.storage_offset());
      }
      outputs.values.push_back(target);
      outputs.views_only = false;
    } else if (aliased.has_value() && alias->isWrite()) {
      outputs.values.push_back(device_args[*aliased]);  // in-place list ops
      outputs.views_only = false;
    } else if (aliased.has_value() && !ret.is_list) {
      outputs.values.push_back(
          viewOf(device_args[*aliased].toTensor(), ret.tensors[0]));
    } else {
      outputs.fresh = true;
      outputs.views_only = false;
      outputs.some_undefined = outputs.some_undefined || ret.has_undefined();
      if (ret.is_list) {
        c10::List<at::Tensor> list;
        for (const TensorMeta& meta : ret.tensors)
          list.push_back(allocateLike(meta));
        outputs.values.push_back(list);
      } else {
        outputs.values.push_back(allocateLike(ret.tensors[0]));
      }
    }
  }
  outputs.views_only = outputs.views_only && !outputs.values.empty();
  return outputs;
}

}  // namespace

void throwDeviceMismatch(c10::Device a, c10::Device b) {
  TORCH_CHECK(false,
              "Expected all tensors to be on the same device, but found at "
              "least two devices, ",
              a, " and ", b, "!");
}

void runOnDevice(const c10::OperatorHandle& op, c10::DispatchKeySet,
                 Stack* stack) {
  if (!hasDeviceKernels(op.operator_name())) {
    static const std::string why = c10::str(
        "operators outside ATen have host implementations, not "
        "device kernels (register a ",
        kDeviceName, " kernel for it)");
    runOnCpuIfAllowed(op, stack, why.c_str());
    return;
  }
  const OperatorTraits& traits = operatorFact<&traitsOf>(op);
  const c10::FunctionSchema& schema = op.schema();
  const size_t n_args = schema.arguments().size();
  const size_t first_arg = stack->size() - n_args;
  const c10::Device device = resolveDevice(op, traits, stack, first_arg);
  TORCH_CHECK_NOT_IMPLEMENTED(
      op.hasComputedKernelForDispatchKey(c10::DispatchKey::CPU), kDeviceName,
      " has no kernel for ", op.operator_name(),
      ": the operator has no CPU kernel for the simulator to run on the "
      "device either.");
  const c10::DeviceGuard guard(device);
  const at::AutoDispatchBelowADInplaceOrView below_autograd;
  // After the Meta kernel's checks, as the CPU kernel makes them; before a
  // synchronous run, which gives out= arguments host tensors of their own.
  const auto check_as_the_cpu_kernel = [&] {
    if (traits.cpu_kernel_check != nullptr) {
      traits.cpu_kernel_check(
          c10::ArrayRef<c10::IValue>(stack->data() + first_arg, n_args));
    }
  };

  if (traits.synchronous) {
    check_as_the_cpu_kernel();
    runAndSynchronize(op, traits, stack, first_arg, device);
    return;
  }

  std::shared_ptr<const OutputMetadata> metadata;
  try {
    metadata = outputMetadata(
        op, c10::ArrayRef<c10::IValue>(stack->data() + first_arg, n_args));
  } catch (const ArgumentOverlapError& overlap) {
    // The call is wrong as the CPU and cuda say at the call: no fallback.
    std::rethrow_exception(overlap.error);
  } catch (const std::exception&) {
    // No Meta kernel, one that needs the data, or one (some are Python)
    // that can't handle this call: compute synchronously instead. Genuine
    // input errors are raised again from there, by the CPU kernel, with
    // the CPU's exception type.
    check_as_the_cpu_kernel();
    runAndSynchronize(op, traits, stack, first_arg, device);
    return;
  }
  check_as_the_cpu_kernel();
  if (traits.cpu_kernel_check_after_meta != nullptr) {
    traits.cpu_kernel_check_after_meta(
        c10::ArrayRef<c10::IValue>(stack->data() + first_arg, n_args));
  }

  // The arguments stay on the stack (not copied) until the launch.
  const c10::ArrayRef<c10::IValue> device_args(stack->data() + first_arg,
                                               n_args);
  DeviceOutputs outputs = deviceOutputsFor(schema, *metadata, device_args);
  if (outputs.views_only) {
    torch::jit::drop(*stack, n_args);
    for (auto& out : outputs.values) {
      stack->push_back(std::move(out));
    }
    return;
  }
  // The device's own kernels, without ATen's per-call set-up: add, mul, ...
  // over dense tensors of one dtype (native_elementwise.h), products with
  // one row, a decode step's Linear (matrix_vector_product.h), and rows
  // picked by index, an embedding lookup or a mask's fill (index_rows.h).
  if (outputs.values.size() == 1 && outputs.values[0].isTensor() &&
      (launchNativeElementwise(op, device_args, outputs.values[0].toTensor()) ||
       launchMatrixVectorProduct(op, device_args,
                                 outputs.values[0].toTensor()) ||
       launchIndexSelectRows(op, device_args, outputs.values[0].toTensor()) ||
       launchIndexRows(op, device_args, outputs.values[0].toTensor()) ||
       launchIndexFillRows(op, device_args, outputs.values[0].toTensor()))) {
    torch::jit::drop(*stack, n_args);
    stack->push_back(std::move(outputs.values[0]));
    return;
  }

  // The kernel's arguments are made now, on the host thread, in program
  // order (random offsets are reserved here).
  const RandomDraws draws{
      device.index(),
      traits.takes_generator
          ? std::max(largestNumel(device_args), largestNumel(outputs.values))
          : 0};
  Stack kernel_stack;
  kernel_stack.reserve(n_args + outputs.values.size());
  for (size_t i = 0; i < n_args; ++i) {
    kernel_stack.push_back(
        hostArgument(schema.arguments()[i], device_args[i], draws));
  }
  std::optional<c10::OperatorHandle> out_variant;
  std::vector<c10::IValue> host_outputs;
  // A dtype the CPU kernel lacks (and cuda has): another kernel computes
  // the functional results, which are copied.
  const std::optional<HostKernel> beyond_cpu =
      kernelBeyondCpuDtypes(op, device_args);
  if (outputs.fresh) {
    // An out= overload can't take an absent output; without one that
    // writes, the functional overload runs (runIntoOutputs).
    if (!outputs.some_undefined && !beyond_cpu.has_value()) {
      out_variant = traits.writing_out_variant;
    }
    // With an out= overload the outputs are its last arguments; without,
    // the kernel copies into them.
    for (const c10::IValue& out : outputs.values) {
      (out_variant.has_value() ? kernel_stack : host_outputs)
          .push_back(hostViewsOf(out));
    }
  }
  torch::jit::drop(*stack, n_args);
  const c10::OperatorHandle to_run = out_variant.value_or(op);
  const bool copy_results = outputs.fresh && !out_variant.has_value();
  launchKernel(
      op.operator_name().name.c_str(),
      [to_run, copy_results, beyond_cpu, arguments = std::move(kernel_stack),
       host_outputs = std::move(host_outputs)]() mutable {
        // Calls consume their stack, and a kernel captured in a graph runs
        // at every replay: each run gets its own copy of the arguments.
        torch::jit::Stack kernel_stack = arguments;
        const auto run = [&](torch::jit::Stack* stack) {
          if (beyond_cpu.has_value()) {
            (*beyond_cpu)(to_run, stack);
          } else {
            to_run.callBoxed(stack);
          }
        };
        if (copy_results) {
          runIntoOutputs(to_run.schema(), run, &kernel_stack, host_outputs);
        } else {
          run(&kernel_stack);
        }
      });
  for (auto& out : outputs.values) {
    stack->push_back(std::move(out));
  }
}

// Registered through the dispatcher's boxed-fallback slot, which is how one
// kernel serves every operator; for mydev it is the main path, not a fallback.
TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&runOnDevice>());
}

}  // namespace mydev
