// Which ISA's kernels run, and the kernels' out-of-line error.
#include "kernel_table.h"

#include <c10/util/Exception.h>

#include <string>

#include "../core/vector_isa.h"
#include "custom_ops.h"

namespace mydev::custom_ops {

const KernelTable& kernelTable() {
  static const KernelTable table = [] {
    switch (vectorIsa()) {
      case VectorIsa::Avx512: return AVX512::isaKernelTable();
      case VectorIsa::Avx2: return AVX2::isaKernelTable();
      case VectorIsa::Default: break;
    }
    return DEFAULT::isaKernelTable();
  }();
  return table;
}

std::string fusedKernelsIsa() { return kernelTable().isa; }

void throwUnsupportedDtypes(const char* op, c10::ScalarType x_type,
                            c10::ScalarType param_type) {
  TORCH_CHECK(false, op, ": no kernel for dtypes ", x_type, " / ", param_type,
              " (float32, bfloat16 or float16, with parameters of the same "
              "dtype or float32)");
}

}  // namespace mydev::custom_ops
