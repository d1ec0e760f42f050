// The predefined ISA macros that `-mavx2` / `-mavx512*` would set, for a file
// that switched its ISA with `#pragma GCC target` (kernels_avx2.cpp,
// kernels_avx512.cpp). g++ preprocesses the whole file before it compiles
// it, so the pragma changes code generation but not these macros, and the
// vector headers (ATen's, Sleef's) test them to pick their implementation.
// Include after the pragma, with MYDEV_ISA_AVX2 or MYDEV_ISA_AVX512 defined.
#pragma once

#if !defined(MYDEV_ISA_AVX2) && !defined(MYDEV_ISA_AVX512)
#error "define MYDEV_ISA_AVX2 or MYDEV_ISA_AVX512 before including isa_macros.h"
#endif

#ifndef __SSE3__
#define __SSE3__ 1
#endif
#ifndef __SSSE3__
#define __SSSE3__ 1
#endif
#ifndef __SSE4_1__
#define __SSE4_1__ 1
#endif
#ifndef __SSE4_2__
#define __SSE4_2__ 1
#endif
#ifndef __POPCNT__
#define __POPCNT__ 1
#endif
#ifndef __AVX__
#define __AVX__ 1
#endif
#ifndef __AVX2__
#define __AVX2__ 1
#endif
#ifndef __FMA__
#define __FMA__ 1
#endif
#ifndef __F16C__
#define __F16C__ 1
#endif
#ifndef __BMI__
#define __BMI__ 1
#endif
#ifndef __BMI2__
#define __BMI2__ 1
#endif

#ifdef MYDEV_ISA_AVX512
#ifndef __AVX512F__
#define __AVX512F__ 1
#endif
#ifndef __AVX512BW__
#define __AVX512BW__ 1
#endif
#ifndef __AVX512VL__
#define __AVX512VL__ 1
#endif
#ifndef __AVX512DQ__
#define __AVX512DQ__ 1
#endif
#endif
