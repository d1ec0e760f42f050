// The fused kernels for the baseline ISA (whatever the build's flags give:
// SSE2 on x86-64), for CPUs without AVX2 and for ATEN_CPU_CAPABILITY=default.
#include "isa_prelude.h"

#define CPU_CAPABILITY DEFAULT
#include "isa_kernels.h"
