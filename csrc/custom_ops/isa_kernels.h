// The body of every kernels_<isa>.cpp: the kernel bodies compiled for the
// ISA the including file selected (CPU_CAPABILITY, CPU_CAPABILITY_<ISA> and
// the compiler's target), and that ISA's KernelTable. A new fused op adds its
// *_kernel.h here and its entries to KernelTable.
#pragma once

#include "rms_norm_kernel.h"
#include "rotary_embedding_kernel.h"
#include "swiglu_kernel.h"

#define MYDEV_STRINGIFY_IMPL(x) #x
#define MYDEV_STRINGIFY(x) MYDEV_STRINGIFY_IMPL(x)

namespace mydev::custom_ops::CPU_CAPABILITY {

KernelTable isaKernelTable() {
  KernelTable table{};
  table.isa = MYDEV_STRINGIFY(CPU_CAPABILITY);
  table.rms_norm_forward = &rmsNormForward;
  table.rms_norm_backward = &rmsNormBackward;
  table.swiglu_forward = &swigluForward;
  table.swiglu_backward = &swigluBackward;
  table.rotary_forward = &rotaryForward;
  table.rotary_backward = &rotaryBackward;
  return table;
}

}  // namespace mydev::custom_ops::CPU_CAPABILITY
