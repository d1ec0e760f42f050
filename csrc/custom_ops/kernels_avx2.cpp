// The fused kernels for AVX2 + FMA (ATen's "AVX2" capability). The build
// compiles every source with the same baseline flags, so the ISA is switched
// here, for this file only, after the ISA-neutral headers (isa_prelude.h).
// kernelTable() calls into it only when ATen reports the capability.
#include "isa_prelude.h"

#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,bmi,bmi2,popcnt")
#define MYDEV_ISA_AVX2
#include "isa_macros.h"
#define CPU_CAPABILITY AVX2
#define CPU_CAPABILITY_AVX2
#include "isa_kernels.h"
#pragma GCC pop_options
#else
namespace mydev::custom_ops::AVX2 {
KernelTable isaKernelTable() { return DEFAULT::isaKernelTable(); }
}  // namespace mydev::custom_ops::AVX2
#endif
