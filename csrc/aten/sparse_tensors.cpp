// Sparse tensors on mydev: COO and the compressed layouts (CSR, CSC, BSR,
// BSC). A sparse mydev tensor's parts (indices, values) are dense mydev
// tensors. Its ops take one of two routes:
//
//  - Most of ATen's sparse kernels are device-generic: native_functions.yaml
//    names the same function for SparseCPU and SparseCUDA. They build
//    results from dense ops on the parts (and sparse constructors), which
//    run on the device. mydev runs them as they are: the call is
//    redispatched to the kernel registered for SparseCPU (SparseCsrCPU),
//    with the mydev tensors.
//  - The ops in kHostViewOps have CPU-specific kernels (CUDA has its own:
//    coalesce, sparse x dense matmul, index_select, sampled_addmm, ...) or
//    call a DispatchStub that only CPU and CUDA fill. They run as device
//    kernels over host views (sparse_host_kernels.h).
//
// tests/test_sparse.py checks hostViewOps() against native_functions.yaml.
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <unordered_set>

#include "../core/device.h"
#include "../core/mydev_stream.h"
#include "device_kernel_path.h"
#include "ivalue_tensors.h"
#include "sparse_host_kernels.h"

namespace mydev {
namespace {

using torch::jit::Stack;

// Every op whose SparseCPU/SparseCsrCPU kernel differs from the CUDA one,
// and the device-generic ones that call a CPU/CUDA-only DispatchStub.
const std::unordered_set<std::string>& hostViewOps() {
  static const std::unordered_set<std::string> ops = {
      // CPU-specific kernels (native_functions.yaml)
      "aten::add.out",
      "aten::addmv.out",
      "aten::bmm",
      "aten::bmm.out",
      "aten::_sparse_sparse_matmul",
      "aten::mul.out",
      "aten::sspaddmm.out",
      "aten::_sparse_sum_backward",
      "aten::_sparse_csr_sum.dim_dtype",
      "aten::_sparse_csr_prod.dim_dtype",
      "aten::_sparse_softmax",
      "aten::_sparse_softmax_backward_data",
      "aten::_sparse_log_softmax",
      "aten::_sparse_log_softmax_backward_data",
      "aten::sparse_sampled_addmm.out",
      "aten::sparse_sampled_addmm",
      "aten::_sparse_mm_reduce_impl",
      "aten::_sparse_mm_reduce_impl_backward",
      "aten::addmm.out",
      "aten::addmm",
      "aten::addmm_",
      "aten::_coalesce",
      "aten::hspmm.out",
      "aten::hspmm",
      "aten::index_select",
      "aten::triangular_solve.X",
      // device-generic kernels over CPU/CUDA-only DispatchStubs
      "aten::sparse_mask",
      "aten::_sparse_mask_projection",
  };
  return ops;
}

std::string qualifiedName(const c10::OperatorName& name) {
  return name.overload_name.empty() ? name.name
                                    : name.name + "." + name.overload_name;
}

// Copies move sparse tensors between devices; every other op needs its
// tensors on one mydev device (0-dim CPU tensors mix freely, as on cuda).
bool crossesDevices(const c10::OperatorName& name) {
  return name.name == "aten::copy_" ||
         name.name == "aten::copy_sparse_to_sparse_";
}

std::optional<c10::Device> deviceOfCall(const c10::OperatorHandle& op,
                                        c10::ArrayRef<c10::IValue> args) {
  std::optional<c10::Device> device;
  std::optional<c10::Device> other;
  for (const c10::IValue& arg : args) {
    forEachTensor(arg, [&](const at::Tensor& t) {
      if (t.device().is_privateuseone()) {
        if (!device.has_value()) {
          device = t.device();
        } else if (*device != t.device()) {
          other = t.device();
        }
      } else if (t.dim() > 0 || t.layout() != at::kStrided) {
        other = t.device();
      }
    });
  }
  if (device.has_value() && other.has_value() &&
      !crossesDevices(op.operator_name())) {
    throwDeviceMismatch(*device, *other);
  }
  return device;
}

void runSparse(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
               Stack* stack) {
  const size_t n_args = op.schema().arguments().size();
  const std::optional<c10::Device> device =
      deviceOfCall(op, c10::ArrayRef<c10::IValue>(
                           stack->data() + stack->size() - n_args, n_args));
  const bool compressed =
      keys.highestPriorityTypeId() == c10::DispatchKey::SparseCsrPrivateUse1;
  const c10::DispatchKey cpu_key =
      compressed ? c10::DispatchKey::SparseCsrCPU : c10::DispatchKey::SparseCPU;
  TORCH_CHECK_NOT_IMPLEMENTED(op.hasKernelForDispatchKey(cpu_key), kDeviceName,
                              " has no kernel for ", op.operator_name(), " on ",
                              compressed ? "sparse compressed" : "sparse COO",
                              " tensors: the CPU has none either.");
  if (device.has_value() &&
      hostViewOps().count(qualifiedName(op.operator_name())) != 0) {
    runSparseOnHostViews(op, stack, *device);
    return;
  }
  const c10::OptionalDeviceGuard guard(device);
  op.redispatchBoxed(c10::DispatchKeySet(cpu_key), stack);
}

// Every op with a CPU sparse kernel gets runSparse registered by name: the
// dispatcher prefers an op's composite kernels (CompositeExplicitAutograd,
// and the CompositeExplicitAutogradNonFunctional ones of structured ops) to
// a backend fallback, and those are made for dense tensors ("is_coalesced
// expected sparse coordinate tensor layout"). The fallback catches the rest.
void registerForOpsWithKernelsFor(torch::Library& library,
                                  c10::DispatchKey cpu_key) {
  for (const c10::OperatorName& name :
       c10::Dispatcher::singleton().getRegistrationsForDispatchKey(cpu_key)) {
    if (name.name.rfind("aten::", 0) != 0) {
      continue;
    }
    const std::string without_namespace = qualifiedName(name).substr(6);
    library.impl(without_namespace.c_str(),
                 torch::CppFunction::makeFromBoxedFunction<&runSparse>());
  }
}

}  // namespace

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&runSparse>());
}

TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&runSparse>());
}

TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  registerForOpsWithKernelsFor(m, c10::DispatchKey::SparseCPU);
}

TORCH_LIBRARY_IMPL(aten, SparseCsrPrivateUse1, m) {
  registerForOpsWithKernelsFor(m, c10::DispatchKey::SparseCsrCPU);
}

}  // namespace mydev
