// The arithmetic of the device's decode-step kernels (a matrix times one
// vector, attention of one query over a KV cache): dot products of float32
// rows and scaled additions, run inside kernels on kernel-side addresses.
//
// The library is compiled for the baseline ISA (SSE2 on x86-64); these loops
// are also compiled for AVX2 and AVX-512 and the widest one ATen itself uses
// (cpuinfo, capped by ATEN_CPU_CAPABILITY) runs, as ATen's own kernels
// choose. A matrix-vector product streams the matrix once, so its speed is
// the speed of these loads: ATen's CPU mm hands one-row products to MKL's
// gemv, whose generic code path (the one MKL takes on non-Intel CPUs) ran
// the decode step's sixteen products 2.8x slower than the AVX-512 loop here.
#pragma once

#include <cstdint>
#include <string>

namespace mydev {

// out[r] = sum over i < length of matrix[r * row_stride + i] * vector[i],
// for r < rows. Summed in float32 in an order fixed for each ISA, so
// results never depend on timing or threads.
void rowDotProducts(const float* matrix, int64_t row_stride, int64_t rows,
                    const float* vector, int64_t length, float* out);

// accumulator[i] += scale * vector[i] for i < length.
void addScaled(float* accumulator, float scale, const float* vector,
               int64_t length);

// "AVX512", "AVX2" or "DEFAULT": the loops in use (tests print it).
std::string floatDotProductIsa();

}  // namespace mydev
