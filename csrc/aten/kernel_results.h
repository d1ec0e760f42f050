// Getting a functional CPU kernel's results into an op's device outputs.
// The device-kernel path runs an op's out= CPU kernel over host views of the
// outputs where the op has a real one; otherwise it runs the functional
// kernel here, whose output allocations are redirected into the device
// outputs (cpu_allocation_redirect.h), and copies only what landed
// elsewhere.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/util/FunctionRef.h>

#include <cstdint>
#include <vector>

namespace mydev {

// True when `out_variant` (an op's out= overload) has no kernel of its own:
// it is a composite that runs the functional kernel and copies into `out`
// (torchgen generates these for ops whose CPU kernel is functional only:
// convolution.out, convolution_backward.out, native_layer_norm.out, ...).
bool outVariantCopiesResults(const c10::OperatorHandle& out_variant);

// Runs `kernel`, a functional CPU kernel of schema `schema` called on
// `stack`, so that its results end up in `host_outputs` (host views of the
// op's device outputs, one per return: a tensor, possibly undefined, or a
// list). A result that the kernel allocated in its output's memory, in the
// output's layout, stays there; the others are copied. Only fresh outputs
// take allocations (not the arguments in-place returns alias). Only inside
// a kernel body.
void runIntoOutputs(const c10::FunctionSchema& schema,
                    c10::function_ref<void(torch::jit::Stack*)> kernel,
                    torch::jit::Stack* stack,
                    const std::vector<c10::IValue>& host_outputs);

// Gives `device_out`, an out= argument, what the CPU kernel made of its host
// stand-in `host_out`: the values, and where the kernel resized it, its
// layout too, as a CPU out= tensor gets it (linalg_lstsq's solution is a
// narrowed column-major buffer, not a dense tensor). Host code: a copy.
void copyOutArgument(const at::Tensor& host_out, const at::Tensor& device_out);

// How many results runIntoOutputs found in place and how many it copied,
// since the last reset: what tests and benchmarks read to see that a
// kernel's output was not copied.
struct ResultPlacementCounts {
  int64_t in_place = 0;
  int64_t copied = 0;
};
ResultPlacementCounts resultPlacementCounts();
void resetResultPlacementCounts();

}  // namespace mydev
