// Sparse layouts (COO, CSR, CSC, BSR, BSC) have no mydev kernels. Without
// this, users would get the dispatcher's generic "Could not run ... with
// arguments from the 'Sparsemydev' backend".
#include <torch/library.h>

namespace mydev {
namespace {

void refuseSparse(const c10::OperatorHandle& op, c10::DispatchKeySet,
                  torch::jit::Stack*) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, "mydev has no kernels for sparse tensors (",
                              op.operator_name(),
                              "): keep sparse tensors on the CPU, or use dense ones "
                              "on mydev (to_dense()).");
}

}  // namespace

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&refuseSparse>());
}

TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&refuseSparse>());
}

}  // namespace mydev
