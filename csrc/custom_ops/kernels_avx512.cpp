// The fused kernels for AVX-512 (ATen's "AVX512" capability: F, BW, VL, DQ,
// with AVX2 and FMA). See kernels_avx2.cpp for how the ISA is switched.
#include "isa_prelude.h"

#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC push_options
#pragma GCC target( \
    "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c,bmi,bmi2,popcnt")
#define MYDEV_ISA_AVX512
#include "isa_macros.h"
#define CPU_CAPABILITY AVX512
#define CPU_CAPABILITY_AVX512
#include "isa_kernels.h"
#pragma GCC pop_options
#else
namespace mydev::custom_ops::AVX512 {
KernelTable isaKernelTable() { return DEFAULT::isaKernelTable(); }
}  // namespace mydev::custom_ops::AVX512
#endif
