#include "sparse_host_kernels.h"

#include <ATen/SparseCsrTensorImpl.h>
#include <ATen/SparseCsrTensorUtils.h>
#include <ATen/SparseTensorImpl.h>
#include <ATen/native/SparseTensorUtils.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_and_tensors.h>
#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>

#include <memory>
#include <vector>

#include "host_view.h"
#include "ivalue_tensors.h"
#include "kernel_launch.h"
#include "op_schema.h"

namespace mydev {
namespace {

using torch::jit::Stack;

// The parts a sparse tensor is made of: COO indices and values, or
// compressed indices, plain indices and values.
std::vector<at::Tensor> partsOf(const at::Tensor& t) {
  if (t.layout() == at::kSparse) {
    const at::SparseTensorImpl* impl = at::sparse::get_sparse_impl(t);
    return {impl->indices(), impl->values()};
  }
  const at::SparseCsrTensorImpl* impl = at::sparse_csr::get_sparse_csr_impl(t);
  return {impl->compressed_indices(), impl->plain_indices(), impl->values()};
}

// A CPU tensor of the same layout as `like`, with `sizes` and `parts`.
// Builds the tensor impl directly: no argument validation, which would
// read the parts' data (host views may be read only inside a kernel).
at::Tensor assemble(const at::Tensor& like, c10::IntArrayRef sizes,
                    const std::vector<at::Tensor>& parts) {
  const at::TensorOptions options = like.options().device(c10::kCPU);
  if (like.layout() == at::kSparse) {
    return at::_sparse_coo_tensor_with_dims_and_tensors(
        like.sparse_dim(), like.dense_dim(), sizes, parts[0], parts[1], options,
        like.is_coalesced());
  }
  at::Tensor compressed = at::detail::make_tensor<at::SparseCsrTensorImpl>(
      c10::DispatchKeySet(c10::DispatchKey::SparseCsrCPU),
      c10::Device(c10::kCPU), like.layout(), like.dtype());
  at::sparse_csr::get_sparse_csr_impl(compressed)
      ->set_member_tensors(parts[0], parts[1], parts[2], sizes);
  return compressed;
}

// The kernel's view of the call's arguments, and the host views it made
// (the storages a result must not keep: they are device memory).
struct HostArguments {
  Stack stack;
  std::vector<c10::Storage> device_memory;
  // out= arguments: fresh host tensors the CPU kernel may resize, by index.
  std::vector<std::pair<size_t, at::Tensor>> outs;
};

HostArguments hostArguments(const c10::FunctionSchema& schema,
                            const std::vector<c10::IValue>& device_args) {
  HostArguments host;
  auto view = [&host](const at::Tensor& t) {
    at::Tensor v = hostView(t);
    host.device_memory.push_back(v.storage());
    return v;
  };
  for (size_t i = 0; i < device_args.size(); ++i) {
    const c10::IValue& arg = device_args[i];
    if (argumentKind(schema.arguments()[i]) == ArgumentKind::Device) {
      host.stack.push_back(arg.isNone() ? arg
                                        : c10::IValue(c10::Device(c10::kCPU)));
      continue;
    }
    if (schema.arguments()[i].is_out() && arg.isTensor()) {
      const at::Tensor& out = arg.toTensor();
      const at::TensorOptions options = out.options().device(c10::kCPU);
      at::Tensor fresh = out.layout() == at::kStrided
                             ? at::empty({0}, options)
                             : at::empty(out.sizes(), options);
      host.outs.emplace_back(i, fresh);
      host.stack.push_back(fresh);
      continue;
    }
    host.stack.push_back(mapTensors(arg, [&](const at::Tensor& t) {
      if (!t.defined() || !t.device().is_privateuseone()) {
        return t;
      }
      if (t.layout() == at::kStrided) {
        return view(t);
      }
      std::vector<at::Tensor> parts = partsOf(t);
      for (at::Tensor& part : parts) part = view(part);
      return assemble(t, t.sizes(), parts);
    }));
  }
  return host;
}

bool inDeviceMemory(const at::Tensor& t,
                    const std::vector<c10::Storage>& device_memory) {
  for (const c10::Storage& storage : device_memory) {
    if (t.storage().is_alias_of(storage)) return true;
  }
  return false;
}

// `t` made of host memory only: a result that shares a part with an
// argument (coalesce of a coalesced tensor is the tensor itself) is copied,
// inside the kernel, where device memory may be read.
at::Tensor ownedByHost(const at::Tensor& t,
                       const std::vector<c10::Storage>& device_memory) {
  if (!t.defined()) {
    return t;
  }
  if (t.layout() == at::kStrided) {
    return inDeviceMemory(t, device_memory) ? t.clone() : t;
  }
  for (const at::Tensor& part : partsOf(t)) {
    if (inDeviceMemory(part, device_memory)) return t.clone();
  }
  return t;
}

// Makes the device tensor `target` hold what the kernel left in `host`:
// an out= result (dense or sparse) or an in-place sparse argument, whose
// parts the CPU kernel may have replaced.
void adopt(const at::Tensor& target, const at::Tensor& host,
           c10::Device device) {
  if (target.layout() == at::kStrided) {
    target.resize_(host.sizes());
    target.copy_(host);
    return;
  }
  std::vector<at::Tensor> parts = partsOf(host);
  for (at::Tensor& part : parts) part = part.to(device);
  if (target.layout() == at::kSparse) {
    at::SparseTensorImpl* impl = at::sparse::get_sparse_impl(target);
    impl->resize_and_clear_(host.sparse_dim(), host.dense_dim(), host.sizes());
    at::sparse::alias_into_sparse(target, parts[0], parts[1]);
    impl->set_coalesced(host.is_coalesced());
    return;
  }
  at::sparse_csr::get_sparse_csr_impl(target)->set_member_tensors(
      parts[0], parts[1], parts[2], host.sizes());
}

}  // namespace

void runSparseOnHostViews(const c10::OperatorHandle& op, Stack* stack,
                          c10::Device device) {
  const c10::FunctionSchema& schema = op.schema();
  const size_t n_args = schema.arguments().size();
  const std::vector<c10::IValue> device_args(stack->end() - n_args,
                                             stack->end());
  const c10::DeviceGuard guard(device);

  struct Outcome {
    HostArguments args;
    Stack results;
  };
  auto outcome = std::make_shared<Outcome>();
  outcome->args = hostArguments(schema, device_args);
  // In-place sparse arguments: the kernel may give them new parts.
  std::vector<size_t> written_sparse;
  for (size_t i = 0; i < n_args; ++i) {
    const c10::AliasInfo* alias = schema.arguments()[i].alias_info();
    const c10::IValue& arg = device_args[i];
    if (alias != nullptr && alias->isWrite() &&
        !schema.arguments()[i].is_out() && arg.isTensor() &&
        arg.toTensor().layout() != at::kStrided) {
      written_sparse.push_back(i);
    }
  }
  // Returns that alias an argument are that device argument (below).
  std::vector<bool> returns_argument;
  for (size_t r = 0; r < schema.returns().size(); ++r) {
    returns_argument.push_back(aliasedArgument(schema, r).has_value());
  }
  runKernelAndWait(op.operator_name().name.c_str(),
                   [op, outcome, written_sparse, returns_argument] {
                     Stack call = outcome->args.stack;
                     op.callBoxed(&call);
                     const auto& memory = outcome->args.device_memory;
                     for (size_t r = 0; r < call.size(); ++r) {
                       if (r < returns_argument.size() && returns_argument[r])
                         continue;
                       call[r] = mapTensors(call[r], [&](const at::Tensor& t) {
                         return ownedByHost(t, memory);
                       });
                     }
                     for (size_t i : written_sparse) {
                       at::Tensor& arg = outcome->args.stack[i].toTensor();
                       arg = ownedByHost(arg, memory);
                     }
                     outcome->results = std::move(call);
                   });
  for (const auto& [index, host_out] : outcome->args.outs) {
    adopt(device_args[index].toTensor(), host_out, device);
  }
  for (size_t i : written_sparse) {
    adopt(device_args[i].toTensor(), outcome->args.stack[i].toTensor(), device);
  }
  torch::jit::drop(*stack, n_args);
  for (size_t r = 0; r < outcome->results.size(); ++r) {
    const std::optional<size_t> aliased = aliasedArgument(schema, r);
    if (aliased.has_value()) {
      stack->push_back(device_args[*aliased]);  // in-place / out=: same tensor
      continue;
    }
    stack->push_back(mapTensors(outcome->results[r], [&](const at::Tensor& t) {
      return t.defined() ? t.to(device) : t;
    }));
  }
}

}  // namespace mydev
