// Which ISA's kernels run, and the kernels' out-of-line error.
#include "kernel_table.h"

#include <ATen/Version.h>
#include <c10/util/Exception.h>

#include <string>

#include "custom_ops.h"

namespace mydev::custom_ops {

const KernelTable& kernelTable() {
  // ATen's own choice (cpuinfo, capped by ATEN_CPU_CAPABILITY), so that the
  // fused kernels and the ATen kernels they are compared with use one ISA.
  static const KernelTable table = [] {
    const std::string capability = at::get_cpu_capability();
    if (capability == "AVX512") {
      return AVX512::isaKernelTable();
    }
    if (capability == "AVX2") {
      return AVX2::isaKernelTable();
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
