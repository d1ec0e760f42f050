// Included by each kernels_<isa>.cpp BEFORE it switches the compiler to its
// vector ISA: every header the vector code needs that is not itself
// ISA-specific. Their inline functions are then compiled for the baseline
// ISA in every translation unit, so the linker's pick among the copies can
// never be an AVX one that a smaller CPU cannot run. (The vector headers
// themselves put everything in the at::vec::CPU_CAPABILITY namespace, and the
// kernel bodies in mydev::custom_ops::CPU_CAPABILITY: one copy per ISA.)
#pragma once

#include <ATen/NumericUtils.h>
#include <ATen/cpu/vec/intrinsics.h>
#include <ATen/native/Math.h>
#include <ATen/native/cpu/zmath.h>
#include <c10/macros/Macros.h>
#include <c10/util/BFloat16-math.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Exception.h>
#include <c10/util/Half.h>
#include <c10/util/Load.h>
#include <c10/util/TypeCast.h>
#include <c10/util/complex.h>
#include <c10/util/copysign.h>
#include <c10/util/irange.h>

#include "kernel_table.h"
#include "parallel.h"
