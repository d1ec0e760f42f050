// Splitting a kernel's range over ATen's intra-op threads.
//
// parallelFor does what at::parallel_for does, out of line: the same OpenMP
// thread team as ATen's own kernels (so fused and ATen kernels never compete
// for cores), the same split (at most one task per thread, each of at least
// `grain` elements), the first exception rethrown on the calling thread. It
// is not at::parallel_for itself because that is inline template code: the
// per-ISA kernel files (see isa_prelude.h) must share no inline code with
// each other, or the linker could keep an AVX-512 copy for every caller. A
// plain function pointer and context keep this free of templates.
#pragma once

#include <cstdint>

namespace mydev::custom_ops {

using RangeFn = void (*)(const void* context, int64_t begin, int64_t end);

// fn(context, b, e) over consecutive subranges [b, e) of [begin, end).
void parallelFor(int64_t begin, int64_t end, int64_t grain, RangeFn fn,
                 const void* context);

}  // namespace mydev::custom_ops
