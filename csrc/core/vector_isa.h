// The vector ISA the device's own kernels are compiled for and run with:
// ATen's choice for its CPU kernels (cpuinfo, capped by
// ATEN_CPU_CAPABILITY=default|avx2|avx512), so that a device kernel and the
// ATen kernel it is compared with, or replaces, use one ISA. The fused
// custom ops, the native elementwise kernels and the float dot products all
// dispatch on it.
#pragma once

namespace mydev {

enum class VectorIsa { Default, Avx2, Avx512 };

// Read once, at the first call.
VectorIsa vectorIsa();

// "DEFAULT", "AVX2" or "AVX512": ATen's names.
const char* vectorIsaName(VectorIsa isa);

}  // namespace mydev
